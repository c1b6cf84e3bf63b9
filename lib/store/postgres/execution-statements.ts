// The PostgreSQL execution store's statements (design/execution §2-3), one named place each, built from the
// shared text in ../execution-statements.ts with positional parameters and transaction_timestamp() as the
// only clock; the terminal CAS reuses the run store's statements (run-statements.ts) for the run lock,
// the run's terminal state and its event.
import {
  activeAttemptsPageSql,
  attemptByReceiptDigestSql,
  closeJournalSql,
  dueDeadlinesPageSql,
  listAttemptEventsSql,
  nextDueInMsSql,
  openJournalPageSql,
} from '../execution-statements';
import { DUE_PREDICATE } from '../dispatch-statements';
import { DB_NOW_MS } from './clock-statements';
import { ATTEMPT_COLUMNS } from './run-statements';

export const EXECUTION_SQL = {
  /** $1 afterRunId, $2 limit. */
  activeAttemptsPage: activeAttemptsPageSql('attempts AS a', { afterRunId: '$1::text', limit: '$2' }),
  /** $1 afterDueAtMs, $2 afterRunId, $3 afterAttemptId, $4 limit; due against the database clock. */
  /** $1 afterRunId, $2 limit, $3 runnerId. */
  ownedAttemptsPage: activeAttemptsPageSql('attempts AS a', {
    afterRunId: '$1::text',
    limit: '$2',
    runnerId: '$3::text',
  }),
  dueDeadlinesPage: dueDeadlinesPageSql('attempts AS a', {
    nowMs: DB_NOW_MS,
    afterDueAtMs: '$1::bigint',
    afterRunId: '$2::text',
    afterAttemptId: '$3::text',
    limit: '$4',
  }),
  /** As dueDeadlinesPage, $5 runnerId. */
  ownedDueDeadlinesPage: dueDeadlinesPageSql('attempts AS a', {
    nowMs: DB_NOW_MS,
    afterDueAtMs: '$1::bigint',
    afterRunId: '$2::text',
    afterAttemptId: '$3::text',
    limit: '$4',
    runnerId: '$5::text',
  }),
  /** $1 runnerId. */
  nextDueInMs: nextDueInMsSql(
    { attempts: 'attempts AS a', dispatches: 'cancellation_dispatches AS d' },
    DUE_PREDICATE.postgres,
    { nowMs: DB_NOW_MS, runnerId: '$1::text' },
  ),
  attemptByReceiptDigest: attemptByReceiptDigestSql({ digest: '$1' }),
  /** A page's attempts, locked after its runs (docs/decisions/0446): $1 run ids, $2 attempt ids; in run-id order. */
  lockAttemptRecords: `SELECT ${ATTEMPT_COLUMNS} FROM attempts
    WHERE (run_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[])) ORDER BY run_id FOR NO KEY UPDATE`,
  /**
   * A page's attempt.terminal events, each at its attempt's next sequence (what SQLite's
   * nextAttemptEventSeqSql and insertAttemptEventSql write for one end): $1 run ids, $2 attempt ids,
   * $3 event ids, $4 JSON payloads, $5 the time read with the run locks.
   */
  insertAttemptEndEvents: `INSERT INTO attempt_events (run_id, attempt_id, seq, id, type, payload, created_at_ms)
    SELECT e.run_id, e.attempt_id, COALESCE((SELECT MAX(x.seq) FROM attempt_events AS x WHERE x.attempt_id = e.attempt_id), 0) + 1,
      e.id, 'attempt.terminal', e.payload::json, $5
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS e(run_id, attempt_id, id, payload)`,
  /**
   * Receipt journal rows, one per attempt (insertJournalSql's rule, written once; a repeated intent
   * keeps the first and reopens a closed row): $1 attempt ids, $2 actions, $3 run ids, $4 reasons.
   */
  insertJournals: `INSERT INTO receipt_journal (attempt_id, action, run_id, reason, created_at_ms, done_at_ms)
    SELECT e.attempt_id, e.action, e.run_id, e.reason, ${DB_NOW_MS}, NULL
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS e(attempt_id, action, run_id, reason)
    ON CONFLICT (attempt_id, action) DO UPDATE SET done_at_ms = NULL WHERE receipt_journal.done_at_ms IS NOT NULL`,
  listAttemptEvents: listAttemptEventsSql({ runId: '$1', attemptId: '$2' }),
  /** $1 afterAtMs, $2 afterAttemptId, $3 afterAction, $4 limit. */
  openJournalPage: openJournalPageSql('receipt_journal', {
    afterAtMs: '$1::bigint',
    afterAttemptId: '$2::text',
    afterAction: '$3::text',
    limit: '$4',
  }),
  closeJournal: closeJournalSql({ attemptId: '$1', action: '$2', nowMs: DB_NOW_MS }),
} as const;
