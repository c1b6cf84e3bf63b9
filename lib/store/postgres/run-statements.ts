// The PostgreSQL run store's statements (design/architecture §5, design/dispatch §2.4), each in one named
// place: runs, attempts and run events, shared by the run store and the result transaction. Row locks
// are always taken Run → Attempt → Dispatch (design/postgres §D7-D8); the run's lock is here, the
// dispatch's in dispatch-statements.ts. Time is only the database's (clock-statements.ts).
import { DB_NOW_MS } from './clock-statements';

const RUN_COLUMNS = `id AS "runId", project_id AS "projectId", owner, status, version,
  cancel_requested_at_ms AS "cancelRequestedAtMs", cancel_reason AS "cancelReason", next_event_seq AS "nextEventSeq",
  created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs"`;

export const ATTEMPT_COLUMNS = `id AS "attemptId", run_id AS "runId", status, pid, handle, deadline_at_ms AS "deadlineAtMs",
  receipt_token_digest AS "receiptTokenDigest", created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs"`;

export const RUN_SQL = {
  // ---- row locks, in the one order every write transaction takes them ----
  /**
   * Lock 1 of 3: the run, with the transaction's time. NO KEY UPDATE: we never change a key, so
   * inserts elsewhere that only check this row's key (foreign keys) are not blocked.
   */
  lockRun: `SELECT ${RUN_COLUMNS}, ${DB_NOW_MS} AS "nowMs" FROM runs WHERE id = $1 FOR NO KEY UPDATE`,
  /**
   * A page's runs, locked in the database's own id order (docs/decisions/0431), the order every
   * statement that locks several runs takes ($1 text[]), so two pages never wait on each other in a cycle.
   */
  lockRunsInOrder: `SELECT ${RUN_COLUMNS}, ${DB_NOW_MS} AS "nowMs" FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE`,
  // ---- runs, attempts, events (the run store and the result transaction) ----
  selectRun: `SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1`,
  insertRun: `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason,
      next_event_seq, created_at_ms, updated_at_ms, name)
    VALUES ($1, $2, $3, 'queued', 0, NULL, NULL, 1, ${DB_NOW_MS}, ${DB_NOW_MS}, $4)
    ON CONFLICT DO NOTHING
    RETURNING ${RUN_COLUMNS}`,
  markRunRunning: `UPDATE runs SET status = 'running', updated_at_ms = $2 WHERE id = $1 AND status = 'queued'`,
  /**
   * The single cancel, a page of one of the project cancel's intent rule (migration 0020, docs/decisions/0340):
   * $1 runId, $2 reason, $3 eventId. One row: the outcome's kind, the event's seq (requested only), the
   * transaction's time and the run's columns as the outcome leaves them (NULL for run_missing and run_terminal).
   */
  requestCancelCall: `SELECT c.kind, c.seq, c.now_ms AS "nowMs", ${RUN_COLUMNS}
    FROM pidfence_request_cancel($1, $2, $3) AS c, LATERAL (SELECT (c.run).*) AS r`,
  /**
   * A project-wide cancel of up to $3 active runs in one statement (migration 0018, docs/decisions/0320):
   * $1 projectId, $2 reason. Answers {requested, cancelledQueued, more}.
   */
  cancelProjectCall: 'SELECT pidfence_cancel_project($1, $2, $3) AS outcome',
  writeRunTerminal: `UPDATE runs SET status = $3, updated_at_ms = $4
    WHERE id = $1 AND version = $2 AND status IN ('queued', 'running')`,
  /** design/dispatch §2.4 step 2: CAS on the run version read under the lock reserves the next event sequence. */
  reserveEventSeq: `UPDATE runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = $3
    WHERE id = $1 AND version = $2
    RETURNING next_event_seq - 1 AS seq, ${RUN_COLUMNS}`,
  insertEvent: `INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
    VALUES ($1, $2, $3, $4, $5::json, $6)`,
  listEvents: `SELECT id, run_id AS "runId", seq, type, payload, created_at_ms AS "createdAtMs"
    FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,

  selectAttempt: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = $1 AND id = $2`,
  selectAttempts: `SELECT ${ATTEMPT_COLUMNS} FROM attempts
    WHERE run_id = ANY ($1::text[]) AND (run_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
  selectAttemptById: `SELECT 1 AS found FROM attempts WHERE id = $1`,
  selectActiveAttempt: `SELECT id FROM attempts WHERE run_id = $1 AND status IN ('claimed', 'starting', 'running')`,
  insertAttempt: `INSERT INTO attempts (run_id, id, status, pid, handle, deadline_at_ms, receipt_token_digest, runner_id, leftovers, created_at_ms, updated_at_ms)
    VALUES ($1, $2, 'claimed', NULL, NULL, $3, $4, $6, $7, $5, $5)
    RETURNING ${ATTEMPT_COLUMNS}`,
  /** Exact CAS on status; pid/handle are written once (a second capture would rebind the process). */
  advanceAttempt: `UPDATE attempts
    SET status = $4, pid = COALESCE($5::integer, pid), handle = COALESCE($6::text, handle), updated_at_ms = ${DB_NOW_MS}
    WHERE run_id = $1 AND id = $2 AND status = $3 AND ($5::integer IS NULL OR pid IS NULL)
    RETURNING ${ATTEMPT_COLUMNS}`,
  endAttempt: `UPDATE attempts SET status = $3, updated_at_ms = $4
    WHERE run_id = $1 AND id = $2 AND status IN ('claimed', 'starting', 'running')
    RETURNING ${ATTEMPT_COLUMNS}`,
  // ---- a page of ends (docs/decisions/0446): endAttempt, writeRunTerminal with reserveEventSeq, and
  // insertEvent, each for a page's runs at once; the caller holds the runs' and attempts' locks ----
  /** $1 run ids, $2 attempt ids, $3 their end statuses, $4 the time read with the run locks. */
  endAttempts: `UPDATE attempts SET status = e.end_status, updated_at_ms = $4
    FROM unnest($1::text[], $2::text[], $3::text[]) AS e(end_run_id, end_attempt_id, end_status)
    WHERE run_id = e.end_run_id AND id = e.end_attempt_id AND status IN ('claimed', 'starting', 'running')
    RETURNING ${ATTEMPT_COLUMNS}`,
  /**
   * The runs' terminal states, each with its event's sequence reserved by the version CAS (the
   * writeRunTerminal and reserveEventSeq of one end): $1 run ids, $2 their versions read under the
   * lock, $3 their end statuses, $4 the time read with the run locks.
   */
  writeRunsTerminal: `UPDATE runs SET status = e.end_status, version = version + 1, next_event_seq = next_event_seq + 1,
      updated_at_ms = $4
    FROM unnest($1::text[], $2::bigint[], $3::text[]) AS e(end_run_id, end_version, end_status)
    WHERE id = e.end_run_id AND version = e.end_version AND status IN ('queued', 'running')
    RETURNING next_event_seq - 1 AS seq, ${RUN_COLUMNS}`,
  /** $1 run ids, $2 seqs, $3 event ids, $4 types, $5 JSON payloads, $6 the time read with the run locks. */
  insertEvents: `INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
    SELECT e.run_id, e.seq, e.id, e.type, e.payload::json, $6 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[])
      AS e(run_id, seq, id, type, payload)`,
} as const;
