// Every SQL statement of the PostgreSQL store, each in one named place (graphile-worker style), with
// the fences in the SQL itself (design/dispatch §2.2 step 6, §2.4) and transaction_timestamp() as the only
// clock (design/postgres §D3). Row locks are always taken Run → Attempt → Dispatch (design/postgres §D7-D8).

import { duePageSql } from '../dispatch-sql';

/**
 * Database time in epoch ms. transaction_timestamp() is fixed for the whole transaction, so every
 * statement of one transaction sees the same instant; the JS side only ever reads it back.
 */
export const DB_NOW_MS = 'floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint';

const RECORD_COLUMNS = `run_id AS "runId", project_id AS "projectId", attempt_id AS "attemptId", status, version,
  dispatch_count AS "dispatchCount", next_attempt_at_ms AS "nextAttemptAtMs", lease_owner AS "leaseOwner",
  lease_token_digest AS "leaseTokenDigest", lease_expires_at_ms AS "leaseExpiresAtMs", last_result AS "lastResult",
  last_dispatched_at_ms AS "lastDispatchedAtMs", blocked_at_ms AS "blockedAtMs", created_at_ms AS "createdAtMs",
  updated_at_ms AS "updatedAtMs"`;

const RUN_COLUMNS = `id AS "runId", project_id AS "projectId", owner, status, version,
  cancel_requested_at_ms AS "cancelRequestedAtMs", cancel_reason AS "cancelReason", next_event_seq AS "nextEventSeq",
  created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs"`;

export const ATTEMPT_COLUMNS = `id AS "attemptId", run_id AS "runId", status, pid, handle, deadline_at_ms AS "deadlineAtMs",
  receipt_token_digest AS "receiptTokenDigest", created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs"`;

const DUE_PAGE = duePageSql(
  'postgres',
  '',
  { nowMs: DB_NOW_MS, afterAtMs: '$1::bigint', afterRunId: '$2::text', limit: '$3', runnerId: '$4::text' },
  { runId: '"runId"', attemptId: '"attemptId"', cancelRequestedAtMs: '"cancelRequestedAtMs"', atMs: '"atMs"' },
);

export const SQL = {
  /** The transaction's clock, for the transactions that take no run lock first. */
  now: `SELECT ${DB_NOW_MS} AS "nowMs"`,

  // ---- row locks, in the one order every write transaction takes them ----
  /**
   * Lock 1 of 3: the run, with the transaction's time. NO KEY UPDATE: we never change a key, so
   * inserts elsewhere that only check this row's key (foreign keys) are not blocked.
   */
  lockRun: `SELECT ${RUN_COLUMNS}, ${DB_NOW_MS} AS "nowMs" FROM runs WHERE id = $1 FOR NO KEY UPDATE`,
  /** Lock 3 of 3 (the attempt's lock, 2 of 3, is in each store's own statement): the dispatch record. */
  lockDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = $1 FOR NO KEY UPDATE`,

  // ---- dispatch repository ----
  /** One round trip each (docs/decisions/0021, 0231): the whole transaction runs in the server. */
  claimCall: 'SELECT pidfence_claim($1, $2, $3, $4, $5, $6) AS outcome',
  /** docs/decisions/0024: the arrays come sorted by run id, one element per item. */
  claimPageCall:
    'SELECT "runId", outcome FROM pidfence_claim_page($1::text[], $2::text[], $3::bigint[], $4, $5::text[], $6)',
  recordResultCall: 'SELECT pidfence_record_result($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS outcome',
  /** docs/decisions/0024: the arrays come sorted by run id, one element per command. */
  recordResultsCall: `SELECT "runId", outcome FROM pidfence_record_results($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
    $6::text[], $7::text[], $8::bigint[], $9::boolean[], $10::text[], $11::text[])`,
  selectDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = $1`,

  /**
   * The bounded due query over one index (docs/decisions/0022).
   * $1 afterAtMs, $2 afterRunId, $3 limit, $4 runnerId (NULL: every runner's).
   */
  duePage: DUE_PAGE,
  /**
   * The due page claimed in the statement that reads it (docs/decisions/0025): the due query's
   * parameters, then $5 owner, $6 one digest per position, $7 lease duration. A due item without an
   * outcome was passed over.
   */
  claimDuePageCall: `WITH due AS MATERIALIZED (${DUE_PAGE}),
    claimed AS MATERIALIZED (SELECT * FROM pidfence_claim_due_page(
      ARRAY(SELECT "runId" FROM due ORDER BY "atMs", "runId"), ARRAY(SELECT "attemptId" FROM due ORDER BY "atMs", "runId"),
      ARRAY(SELECT "cancelRequestedAtMs" FROM due ORDER BY "atMs", "runId"), $5, $6::text[], $7))
    SELECT due.*, claimed.outcome FROM due LEFT JOIN claimed USING ("runId") ORDER BY due."atMs", due."runId"`,
  /**
   * design/dispatch §2.2 step 3 for an attempt created after the cancel: migration 0018's set rule with
   * one run, the rule's one PostgreSQL home (docs/decisions/0340). $1 runId, $2 nowMs.
   */
  insertPendingDispatch: 'SELECT pidfence_insert_pending_dispatches(ARRAY[$1::text], $2::bigint)',

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
} as const;
