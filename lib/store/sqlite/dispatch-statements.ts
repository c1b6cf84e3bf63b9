// The SQLite dispatch repository's statements, each in one named place (graphile-worker style), with the
// fences written into the SQL itself (design/dispatch §2.2 step 6, §2.4). The connection prepares them
// together with run-statements.ts (prepared.ts).
import { duePageSql, insertPendingDispatchSql } from '../dispatch-statements';

const RECORD_COLUMNS = `run_id AS runId, project_id AS projectId, attempt_id AS attemptId, status, version,
  dispatch_count AS dispatchCount, next_attempt_at_ms AS nextAttemptAtMs, lease_owner AS leaseOwner,
  lease_token_digest AS leaseTokenDigest, lease_expires_at_ms AS leaseExpiresAtMs, last_result AS lastResult,
  last_dispatched_at_ms AS lastDispatchedAtMs, blocked_at_ms AS blockedAtMs, created_at_ms AS createdAtMs,
  updated_at_ms AS updatedAtMs`;

export const DISPATCH_SQL = {
  // ---- dispatch repository ----
  selectDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = ?`,

  /** Steps 3+6 at once, for a run with no row yet (a row written before the pending one of docs/decisions/0022 existed). */
  insertLeasedDispatch: `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version,
      dispatch_count, next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result,
      last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (:runId, :projectId, :attemptId, 'leased', 1, 1, NULL, :owner, :digest, :expiresAtMs, NULL, :nowMs, NULL, :nowMs, :nowMs)
    RETURNING ${RECORD_COLUMNS}`,

  /** Step 6: version CAS; the due/expiry rule is repeated here so a stale read can never lease. */
  leaseDispatch: `UPDATE cancellation_dispatches
    SET status = 'leased', version = version + 1, dispatch_count = dispatch_count + 1, next_attempt_at_ms = NULL,
        lease_owner = :owner, lease_token_digest = :digest, lease_expires_at_ms = :expiresAtMs,
        last_dispatched_at_ms = :nowMs, updated_at_ms = :nowMs
    WHERE run_id = :runId AND attempt_id = :attemptId AND version = :version
      AND ((status IN ('pending', 'retry_wait') AND next_attempt_at_ms <= :nowMs)
        OR (status = 'leased' AND lease_expires_at_ms <= :nowMs))
    RETURNING ${RECORD_COLUMNS}`,

  /** design/dispatch §2.4: the whole fence in the WHERE clause; no row back means stale_fence. */
  settleDispatch: `UPDATE cancellation_dispatches
    SET status = :status, version = version + 1, last_result = :result, next_attempt_at_ms = :nextAttemptAtMs,
        blocked_at_ms = :blockedAtMs, lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL,
        updated_at_ms = :nowMs
    WHERE run_id = :runId AND attempt_id = :attemptId AND status = 'leased'
      AND lease_owner = :owner AND lease_token_digest = :digest AND version = :expectedVersion
    RETURNING ${RECORD_COLUMNS}`,

  /** The bounded due query over one index (docs/decisions/0022). */
  duePage: duePageSql(
    'sqlite',
    'INDEXED BY cancellation_dispatches_due',
    { nowMs: ':nowMs', afterAtMs: ':afterAtMs', afterRunId: ':afterRunId', limit: ':limit', runnerId: ':runnerId' },
    { runId: 'runId', attemptId: 'attemptId', cancelRequestedAtMs: 'cancelRequestedAtMs', atMs: 'atMs' },
  ),
  /** design/dispatch §2.2 step 3 at cancel time (and for an attempt created after it). */
  insertPendingDispatch: insertPendingDispatchSql({ runId: ':runId', nowMs: ':nowMs' }),
} as const;
