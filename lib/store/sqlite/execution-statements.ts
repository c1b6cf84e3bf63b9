// The SQL of the SQLite execution store (ADR-0072 §2-3), each statement in one named place; the
// terminal CAS reuses the run store's statements (statements.ts) for the run and its event.
import type Database from 'better-sqlite3';

export const EXECUTION_SQL = {
  /** attempts_one_active is unique on run_id: (run_id) alone is a stable keyset. */
  activeAttemptsPage: `SELECT a.run_id AS runId, a.id AS attemptId, a.status, a.handle IS NOT NULL AS hasHandle,
      r.cancel_requested_at_ms AS cancelRequestedAtMs, r.cancel_reason AS cancelReason
    FROM attempts AS a INDEXED BY attempts_one_active
    JOIN runs AS r ON r.id = a.run_id
    WHERE a.status IN ('claimed', 'starting', 'running') AND a.run_id > :afterRunId
    ORDER BY a.run_id
    LIMIT :limit`,

  /** attempts_deadline_due serves the order and the bound; runs with intent already are skipped. */
  dueDeadlinesPage: `SELECT a.run_id AS runId, a.id AS attemptId, a.deadline_at_ms AS dueAtMs
    FROM attempts AS a INDEXED BY attempts_deadline_due
    JOIN runs AS r ON r.id = a.run_id
    WHERE a.deadline_at_ms IS NOT NULL AND a.status IN ('claimed', 'starting', 'running')
      AND a.deadline_at_ms <= :nowMs
      AND (a.deadline_at_ms, a.run_id, a.id) > (:afterDueAtMs, :afterRunId, :afterAttemptId)
      AND r.cancel_requested_at_ms IS NULL AND r.status IN ('queued', 'running')
    ORDER BY a.deadline_at_ms, a.run_id, a.id
    LIMIT :limit`,

  attemptByReceiptDigest: `SELECT run_id AS runId, id AS attemptId FROM attempts WHERE receipt_token_digest = ?`,

  nextAttemptEventSeq: `SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM attempt_events WHERE attempt_id = ?`,
  insertAttemptEvent: `INSERT INTO attempt_events (run_id, attempt_id, seq, id, type, payload, created_at_ms)
    VALUES (:runId, :attemptId, :seq, :eventId, 'attempt.terminal', :payload, :nowMs)`,
  listAttemptEvents: `SELECT id, run_id AS runId, attempt_id AS attemptId, seq, type, payload, created_at_ms AS createdAtMs
    FROM attempt_events WHERE run_id = ? AND attempt_id = ? ORDER BY seq LIMIT 64`,

  /** A journal row is written once; a repeated intent keeps the first one. */
  insertJournal: `INSERT INTO receipt_journal (attempt_id, action, run_id, reason, created_at_ms, done_at_ms)
    VALUES (:attemptId, :action, :runId, :reason, :nowMs, NULL)
    ON CONFLICT (attempt_id, action) DO UPDATE SET done_at_ms = NULL WHERE done_at_ms IS NOT NULL`,
  openJournalPage: `SELECT run_id AS runId, attempt_id AS attemptId, action, created_at_ms AS createdAtMs
    FROM receipt_journal INDEXED BY receipt_journal_open
    WHERE done_at_ms IS NULL AND (created_at_ms, attempt_id, action) > (:afterAtMs, :afterAttemptId, :afterAction)
    ORDER BY created_at_ms, attempt_id, action
    LIMIT :limit`,
  closeJournal: `UPDATE receipt_journal SET done_at_ms = :nowMs WHERE attempt_id = :attemptId AND action = :action AND done_at_ms IS NULL`,
} as const;

export type ExecutionStatements = { readonly [K in keyof typeof EXECUTION_SQL]: Database.Statement };

export function prepareExecutionStatements(database: Database.Database): ExecutionStatements {
  const prepared = {} as Record<keyof typeof EXECUTION_SQL, Database.Statement>;
  for (const name of Object.keys(EXECUTION_SQL) as Array<keyof typeof EXECUTION_SQL>) prepared[name] = database.prepare(EXECUTION_SQL[name]);
  return prepared;
}
