// The PostgreSQL execution store's statements (design/execution §2-3), one named place each, built from the
// shared text in ../execution-statements.ts with positional parameters and transaction_timestamp() as the
// only clock; the terminal CAS reuses the run store's statements (run-statements.ts) for the run lock,
// the run's terminal state and its event.
import {
  activeAttemptsPageSql,
  attemptByReceiptDigestSql,
  closeJournalSql,
  dueDeadlinesPageSql,
  insertAttemptEventSql,
  insertJournalSql,
  listAttemptEventsSql,
  nextAttemptEventSeqSql,
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
  /** Lock 2 of 3 (after the run): the attempt with its record, by its composite key. */
  lockAttemptRecord: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE`,
  nextAttemptEventSeq: nextAttemptEventSeqSql({ attemptId: '$1' }),
  /** $6 is the time read with the run lock (transaction_timestamp()). */
  insertAttemptEvent: insertAttemptEventSql({
    runId: '$1',
    attemptId: '$2',
    seq: '$3',
    eventId: '$4',
    payload: '$5::json',
    nowMs: '$6::bigint',
  }),
  listAttemptEvents: listAttemptEventsSql({ runId: '$1', attemptId: '$2' }),
  insertJournal: insertJournalSql({ attemptId: '$1', action: '$2', runId: '$3', reason: '$4::text', nowMs: DB_NOW_MS }),
  /** $1 afterAtMs, $2 afterAttemptId, $3 afterAction, $4 limit. */
  openJournalPage: openJournalPageSql('receipt_journal', {
    afterAtMs: '$1::bigint',
    afterAttemptId: '$2::text',
    afterAction: '$3::text',
    limit: '$4',
  }),
  closeJournal: closeJournalSql({ attemptId: '$1', action: '$2', nowMs: DB_NOW_MS }),
} as const;
