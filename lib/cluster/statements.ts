// The cluster tables' statements (docs/decisions/0100), one named place each. Time is only the
// database's (transaction_timestamp(), design/postgres §D3); every write transaction locks Run first.
import { DB_NOW_MS } from '../store/postgres/statements';

const LEASE_COLUMNS = `run_id AS "runId", attempt_id AS "attemptId", session_id AS "sessionId", fence,
  expires_at_ms AS "expiresAtMs", released_at_ms AS "releasedAtMs"`;

export const CLUSTER_SQL = {
  insertSession: `INSERT INTO worker_sessions (id, principal, started_at_ms, last_seen_at_ms, ended_at_ms)
    VALUES ($1, $2, ${DB_NOW_MS}, ${DB_NOW_MS}, NULL)`,
  /** The session of this principal, still open; touches last_seen. */
  touchSession: `UPDATE worker_sessions SET last_seen_at_ms = ${DB_NOW_MS}
    WHERE id = $1 AND principal = $2 AND ended_at_ms IS NULL RETURNING id`,
  endSession: `UPDATE worker_sessions SET ended_at_ms = ${DB_NOW_MS}, last_seen_at_ms = ${DB_NOW_MS}
    WHERE id = $1 AND principal = $2 AND ended_at_ms IS NULL RETURNING id`,
  insertJob: `INSERT INTO cluster_jobs (run_id, argv, timeout_ms, created_at_ms) VALUES ($1, $2::json, $3, ${DB_NOW_MS})`,
  /**
   * The oldest waiting job: a queued runtime run without cancel intent. Locks the run (lock 1 of the
   * Run → Attempt → Lease order); SKIP LOCKED so two replicas hand out two different runs.
   */
  lockWaitingJob: `SELECT j.run_id AS "runId", r.project_id AS "projectId", j.argv, j.timeout_ms AS "timeoutMs"
    FROM cluster_jobs AS j JOIN runs AS r ON r.id = j.run_id
    WHERE r.status = 'queued' AND r.owner = 'runtime' AND r.cancel_requested_at_ms IS NULL
    ORDER BY j.created_at_ms, j.run_id LIMIT 1
    FOR NO KEY UPDATE OF r SKIP LOCKED`,
  /**
   * A new grant: the fence is the database clock at the grant, and always above any earlier grant's
   * fence on the run, so it only grows even if the server clock stepped back (docs/decisions/0100).
   */
  grantLease: `INSERT INTO run_dispatch_leases (run_id, attempt_id, session_id, fence, expires_at_ms, released_at_ms, created_at_ms, updated_at_ms)
    VALUES ($1, $2, $3, $4, $4::bigint + $5::bigint, NULL, $4, $4)
    ON CONFLICT (run_id) DO UPDATE SET attempt_id = EXCLUDED.attempt_id, session_id = EXCLUDED.session_id,
      fence = GREATEST(run_dispatch_leases.fence + 1, EXCLUDED.fence), expires_at_ms = EXCLUDED.expires_at_ms, released_at_ms = NULL,
      updated_at_ms = EXCLUDED.updated_at_ms
    RETURNING ${LEASE_COLUMNS}`,
  /** Lock 3: the lease row (after the run and the attempt). */
  lockLease: `SELECT ${LEASE_COLUMNS} FROM run_dispatch_leases WHERE run_id = $1 FOR NO KEY UPDATE`,
  renewLease: `UPDATE run_dispatch_leases SET expires_at_ms = $2::bigint + $3::bigint, updated_at_ms = $2
    WHERE run_id = $1 AND fence = $4 AND released_at_ms IS NULL RETURNING ${LEASE_COLUMNS}`,
  releaseLease: `UPDATE run_dispatch_leases SET released_at_ms = $2, updated_at_ms = $2
    WHERE run_id = $1 AND fence = $3 AND released_at_ms IS NULL`,
  /** Expired, unreleased leases (bounded page for the reap on the pull path). */
  expiredLeases: `SELECT run_id AS "runId", attempt_id AS "attemptId", fence FROM run_dispatch_leases
    WHERE released_at_ms IS NULL AND expires_at_ms <= ${DB_NOW_MS}
    ORDER BY expires_at_ms, run_id LIMIT $1`,
  lockAttemptFacts: `SELECT status, deadline_at_ms AS "deadlineAtMs" FROM attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE`,
  markAttemptRunning: `UPDATE attempts SET status = 'running', updated_at_ms = $3 WHERE run_id = $1 AND id = $2 AND status = 'claimed'`,
  selectLease: `SELECT ${LEASE_COLUMNS} FROM run_dispatch_leases WHERE run_id = $1`,
} as const;
