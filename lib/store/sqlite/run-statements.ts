// The SQLite statements of runs, attempts and run events, each in one named place, shared by the run
// store and the result transaction (design/architecture §5, design/dispatch §2.4). The connection prepares
// them together with dispatch-statements.ts (prepared.ts).

const RUN_COLUMNS = `id AS runId, project_id AS projectId, owner, status, version,
  cancel_requested_at_ms AS cancelRequestedAtMs, cancel_reason AS cancelReason, next_event_seq AS nextEventSeq,
  created_at_ms AS createdAtMs, updated_at_ms AS updatedAtMs`;

const ATTEMPT_COLUMNS = `id AS attemptId, run_id AS runId, status, pid, handle, deadline_at_ms AS deadlineAtMs,
  receipt_token_digest AS receiptTokenDigest, created_at_ms AS createdAtMs, updated_at_ms AS updatedAtMs`;

export const RUN_SQL = {
  // ---- runs, attempts, events (shared by the run store and the result transaction) ----
  selectRun: `SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`,
  insertRun: `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason,
      next_event_seq, created_at_ms, updated_at_ms, name)
    VALUES (:runId, :projectId, :owner, 'queued', 0, NULL, NULL, 1, :nowMs, :nowMs, :name)
    ON CONFLICT DO NOTHING
    RETURNING ${RUN_COLUMNS}`,
  /** Run fields change under the same version CAS that reserves the event sequence. */
  markRunRunning: `UPDATE runs SET status = 'running', updated_at_ms = :nowMs WHERE id = :runId AND status = 'queued'`,
  writeCancelIntent: `UPDATE runs SET cancel_requested_at_ms = :nowMs, cancel_reason = :reason, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version AND cancel_requested_at_ms IS NULL`,
  writeRunTerminal: `UPDATE runs SET status = :status, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version AND status IN ('queued', 'running')`,
  /** design/dispatch §2.4 step 2: CAS on the current run version reserves the next event sequence. */
  reserveEventSeq: `UPDATE runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version
    RETURNING next_event_seq - 1 AS seq`,
  insertEvent: `INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
    VALUES (:runId, :seq, :eventId, :type, :payload, :nowMs)`,
  listEvents: `SELECT id, run_id AS runId, seq, type, payload, created_at_ms AS createdAtMs
    FROM run_events WHERE run_id = :runId AND seq > :afterSeq ORDER BY seq LIMIT :limit`,

  selectAttempt: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? AND id = ?`,
  /** A claim needs only the attempt's status (design/dispatch §2.2 step 2), not its handle. */
  selectAttemptStatus: `SELECT status FROM attempts WHERE run_id = ? AND id = ?`,
  /** A transaction that appends an event to a run it does not otherwise read needs only the version for the CAS. */
  selectRunVersion: `SELECT version FROM runs WHERE id = ?`,
  selectAttemptById: `SELECT 1 AS found FROM attempts WHERE id = ?`,
  selectActiveAttempt: `SELECT id FROM attempts WHERE run_id = ? AND status IN ('claimed', 'starting', 'running')`,
  insertAttempt: `INSERT INTO attempts (run_id, id, status, pid, handle, deadline_at_ms, receipt_token_digest, runner_id, leftovers, created_at_ms, updated_at_ms)
    VALUES (:runId, :attemptId, 'claimed', NULL, NULL, :deadlineAtMs, :receiptTokenDigest, :runnerId, :leftovers, :nowMs, :nowMs)
    RETURNING ${ATTEMPT_COLUMNS}`,
  /** Exact CAS on status; pid/handle are written once (a second capture would rebind the process). */
  advanceAttempt: `UPDATE attempts
    SET status = :to, pid = COALESCE(:pid, pid), handle = COALESCE(:handle, handle), updated_at_ms = :nowMs
    WHERE run_id = :runId AND id = :attemptId AND status = :from AND (:pid IS NULL OR pid IS NULL)
    RETURNING ${ATTEMPT_COLUMNS}`,
  endAttempt: `UPDATE attempts SET status = :status, updated_at_ms = :nowMs
    WHERE run_id = :runId AND id = :attemptId AND status IN ('claimed', 'starting', 'running')
    RETURNING ${ATTEMPT_COLUMNS}`,
} as const;
