// The worker fleet's statements (docs/decisions/0240, 0241, 0245), one named place each: the hold the
// control plane reads on every request, a worker's announcement, an operator's act with its audit
// row, and the fleet read. Time is only the database's (design/postgres §D3).
import { DB_NOW_MS } from './clock-statements';

const HOLD = `admission, revoked_at_ms IS NOT NULL AS revoked`;

export const FLEET_SQL = {
  /** The audit row of a worker's latest forget (the lease store writes it, docs/decisions/0271). */
  lastForgetAudit: `SELECT outcome, revision FROM worker_audit WHERE worker_name = $1 AND action = 'forget' ORDER BY created_at_ms DESC, id DESC LIMIT 1`,
  /** Every request: one primary-key read, no write (a missing row is an active, unrevoked worker). */
  hold: `SELECT ${HOLD} FROM cluster_workers WHERE name = $1`,
  /** After a pull handed out a run: waits for a drain in flight to commit, then reads the hold. */
  holdForShare: `SELECT ${HOLD} FROM cluster_workers WHERE name = $1 FOR SHARE`,
  announce: `INSERT INTO cluster_workers (name, admission, revoked_at_ms, software_version, capacity, revision, created_at_ms, updated_at_ms)
    VALUES ($1, 'active', NULL, $2, $3, 0, ${DB_NOW_MS}, ${DB_NOW_MS})
    ON CONFLICT (name) DO UPDATE SET software_version = EXCLUDED.software_version, capacity = EXCLUDED.capacity,
      updated_at_ms = GREATEST(cluster_workers.updated_at_ms, EXCLUDED.updated_at_ms)
    RETURNING ${HOLD}`,
  /** A name is known once it registered a session or has a row. */
  known: `SELECT EXISTS (SELECT 1 FROM cluster_workers WHERE name = $1) OR EXISTS (SELECT 1 FROM worker_sessions WHERE principal = $1) AS known`,
  ensureRow: `INSERT INTO cluster_workers (name, admission, revoked_at_ms, software_version, capacity, revision, created_at_ms, updated_at_ms)
    VALUES ($1, 'active', NULL, NULL, NULL, 0, ${DB_NOW_MS}, ${DB_NOW_MS}) ON CONFLICT (name) DO NOTHING`,
  /** An operator's act serialises on the worker's row: a second operator waits, then sees the first's change. */
  lockRow: `SELECT ${HOLD}, revision, ${DB_NOW_MS} AS "nowMs" FROM cluster_workers WHERE name = $1 FOR UPDATE`,
  writeHold: `UPDATE cluster_workers SET admission = $2,
      revoked_at_ms = CASE WHEN NOT $3::boolean THEN NULL ELSE COALESCE(revoked_at_ms, $4::bigint) END,
      revision = revision + 1, updated_at_ms = GREATEST(updated_at_ms, $4::bigint)
    WHERE name = $1 RETURNING revision`,
  insertAudit: `INSERT INTO worker_audit (id, worker_name, action, actor, outcome, revision, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
  /** Revocation ends the name's sessions at once (their last heartbeat stays what it was). */
  endSessionsOf: `UPDATE worker_sessions SET ended_at_ms = GREATEST(started_at_ms, $2::bigint)
    WHERE principal = $1 AND ended_at_ms IS NULL`,
  /** The runs whose leases the name's sessions hold (a drain asks each to stop); bounded. */
  heldRunsOf: `SELECT l.run_id AS "runId" FROM run_dispatch_leases AS l JOIN worker_sessions AS s ON s.id = l.session_id
    WHERE s.principal = $1 AND l.released_at_ms IS NULL ORDER BY l.run_id LIMIT $2`,
  /**
   * The fleet: every name with a row or a session, by name, at most $1 (+1 to tell truncation), with
   * its sessions, last heartbeat and held leases as the session and lease tables have them today.
   */
  fleet: `WITH names AS (SELECT name FROM cluster_workers UNION SELECT principal FROM worker_sessions),
      page AS (SELECT name FROM names ORDER BY name LIMIT $1)
    SELECT p.name, w.admission, w.revoked_at_ms AS "revokedAtMs", w.software_version AS "version", w.capacity,
      (SELECT count(*) FROM worker_sessions AS s WHERE s.principal = p.name AND s.ended_at_ms IS NULL) AS sessions,
      (SELECT max(s.last_seen_at_ms) FROM worker_sessions AS s WHERE s.principal = p.name) AS "lastSeenAtMs",
      (SELECT count(*) FROM run_dispatch_leases AS l JOIN worker_sessions AS s ON s.id = l.session_id
        WHERE s.principal = p.name AND l.released_at_ms IS NULL) AS "leasesHeld",
      (SELECT count(*) FROM run_dispatch_leases AS l JOIN worker_sessions AS s ON s.id = l.session_id
        WHERE s.principal = p.name AND l.released_at_ms IS NULL AND l.unreachable_at_ms IS NOT NULL) AS "runsUnreachable",
      ${DB_NOW_MS} AS "nowMs"
    FROM page AS p LEFT JOIN cluster_workers AS w ON w.name = p.name ORDER BY p.name`,
  nowMs: `SELECT ${DB_NOW_MS} AS "nowMs"`,
  /** Whether a session was registered under this name (a completion names a session; docs/decisions/0240). */
  sessionOf: `SELECT 1 AS one FROM worker_sessions WHERE id = $1 AND principal = $2`,
  /** A held-back pull still counts as the worker's heartbeat, as a pull does (docs/decisions/0241). */
  touchSession: `UPDATE worker_sessions SET last_seen_at_ms = GREATEST(last_seen_at_ms, ${DB_NOW_MS})
    WHERE id = $1 AND principal = $2 AND ended_at_ms IS NULL RETURNING id`,
} as const;
