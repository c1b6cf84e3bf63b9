// The cluster lease store's statements (docs/decisions/0100), one named place each. Time is only the
// database's (transaction_timestamp(), design/postgres §D3); every write transaction locks Run first.
import { DB_NOW_MS } from './clock-statements';

const LEASE_COLUMNS = `run_id AS "runId", attempt_id AS "attemptId", session_id AS "sessionId", fence,
  expires_at_ms AS "expiresAtMs", released_at_ms AS "releasedAtMs", unreachable_at_ms AS "unreachableAtMs", forgotten_at_ms AS "forgottenAtMs"`;

export const CLUSTER_LEASE_SQL = {
  /**
   * A cancelled job that no worker pulled ends `cancelled`: migration 0020's rule with one run, the
   * rule's one PostgreSQL home (docs/decisions/0340). $1 runId. Answers 1 when it ended, else 0.
   */
  endQueuedCancel: `SELECT pidfence_end_queued_cancels(ARRAY[$1::text], ${DB_NOW_MS}) AS ended`,
  /** A session lives for one worker lease ($3 ms) from its registration, then as long as it ticks (docs/decisions/0200). */
  insertSession: `INSERT INTO worker_sessions (id, principal, started_at_ms, last_seen_at_ms, ended_at_ms, expires_at_ms)
    VALUES ($1, $2, ${DB_NOW_MS}, ${DB_NOW_MS}, NULL, ${DB_NOW_MS} + $3::bigint)`,
  /**
   * The session of this principal, still open; its heartbeat is extended by $3 ms, also after it
   * lapsed: its holder answers for its leases again (docs/decisions/0273, 0275).
   */
  touchSession: `UPDATE worker_sessions AS s SET last_seen_at_ms = GREATEST(s.last_seen_at_ms, ${DB_NOW_MS}),
      expires_at_ms = GREATEST(s.expires_at_ms, ${DB_NOW_MS} + $3::bigint)
    WHERE s.id = $1 AND s.principal = $2 AND s.ended_at_ms IS NULL RETURNING s.id`,
  endSession: `UPDATE worker_sessions SET ended_at_ms = ${DB_NOW_MS}, last_seen_at_ms = ${DB_NOW_MS}
    WHERE id = $1 AND principal = $2 AND ended_at_ms IS NULL RETURNING id`,
  insertJob: `INSERT INTO cluster_jobs (run_id, argv, timeout_ms, created_at_ms, stop_after_disconnect_ms) VALUES ($1, $2::json, $3, ${DB_NOW_MS}, $4)`,
  /**
   * The oldest waiting job: a queued runtime run without cancel intent. Locks the run (lock 1 of the
   * Run → Attempt → Lease order); SKIP LOCKED so two replicas hand out two different runs.
   */
  lockWaitingJob: `SELECT j.run_id AS "runId", r.project_id AS "projectId", j.argv, j.timeout_ms AS "timeoutMs",
      j.stop_after_disconnect_ms AS "stopAfterDisconnectMs"
    FROM cluster_jobs AS j JOIN runs AS r ON r.id = j.run_id
    WHERE r.status = 'queued' AND r.owner = 'runtime' AND r.cancel_requested_at_ms IS NULL
    ORDER BY j.created_at_ms, j.run_id LIMIT 1
    FOR NO KEY UPDATE OF r SKIP LOCKED`,
  /**
   * A new grant: the fence is the database clock at the grant, and always above any earlier grant's
   * fence on the run, so it only grows even if the server clock stepped back (docs/decisions/0100).
   */
  grantLease: `INSERT INTO run_dispatch_leases (run_id, attempt_id, session_id, fence, expires_at_ms, released_at_ms, created_at_ms, updated_at_ms, pull_id)
    VALUES ($1, $2, $3, $4, $4::bigint + $5::bigint, NULL, $4, $4, $6)
    ON CONFLICT (run_id) DO UPDATE SET attempt_id = EXCLUDED.attempt_id, session_id = EXCLUDED.session_id,
      fence = GREATEST(run_dispatch_leases.fence + 1, EXCLUDED.fence), expires_at_ms = EXCLUDED.expires_at_ms, released_at_ms = NULL,
      updated_at_ms = EXCLUDED.updated_at_ms, pull_id = EXCLUDED.pull_id
    RETURNING ${LEASE_COLUMNS}`,
  /**
   * What a named pull of this session granted (migration 0021, docs/decisions/0437), as the pull
   * answered it, in the order it granted them; a lease ended since is not answered again.
   */
  grantsOfPull: `SELECT l.run_id AS "runId", r.project_id AS "projectId", l.attempt_id AS "attemptId", l.fence, j.argv,
      l.expires_at_ms AS "expiresAtMs", a.deadline_at_ms AS "deadlineAtMs", j.stop_after_disconnect_ms AS "stopAfterDisconnectMs"
    FROM run_dispatch_leases AS l
      JOIN runs AS r ON r.id = l.run_id
      JOIN cluster_jobs AS j ON j.run_id = l.run_id
      JOIN attempts AS a ON a.run_id = l.run_id AND a.id = l.attempt_id
    WHERE l.session_id = $1 AND l.pull_id = $2 AND l.released_at_ms IS NULL
    ORDER BY j.created_at_ms, j.run_id`,
  /**
   * Every lease of one worker in one statement (migration 0016, docs/decisions/0200): the session's
   * row first (runId NULL), then a row for each lease that is not a plain renewal.
   */
  leaseTick: `SELECT "runId", answer FROM pidfence_lease_tick($1, $2, $3::text[], $4::text[], $5::bigint[], $6)`,
  releaseLease: `UPDATE run_dispatch_leases SET released_at_ms = $2, updated_at_ms = $2
    WHERE run_id = $1 AND fence = $3 AND released_at_ms IS NULL`,
  /** The open, unmarked leases of lapsed sessions, a bounded page for the reap (docs/decisions/0200, 0275). */
  expiredLeases: `SELECT "runId", "attemptId", fence FROM pidfence_lapsed_leases($1)`,
  /** Lock 3: the lease row (after the run and the attempt). */
  lockLease: `SELECT ${LEASE_COLUMNS} FROM run_dispatch_leases WHERE run_id = $1 FOR NO KEY UPDATE`,
  /**
   * Sessions whose heartbeat stopped (docs/decisions/0270): ended once nothing was heard for $1 ms. A
   * worker that comes back registers again and re-attaches its runs; bounded to $2 per call.
   */
  expireSessions: `UPDATE worker_sessions SET ended_at_ms = GREATEST(started_at_ms, ${DB_NOW_MS})
    WHERE id IN (SELECT id FROM worker_sessions WHERE ended_at_ms IS NULL AND last_seen_at_ms < ${DB_NOW_MS} - $1::bigint
      ORDER BY last_seen_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)`,
  /** The reap's mark (docs/decisions/0270): the lease keeps its session and fence; the run stays active. */
  markUnreachable: `UPDATE run_dispatch_leases AS l SET unreachable_at_ms = $2, updated_at_ms = $2
    WHERE l.run_id = $1 AND l.fence = $3 AND l.released_at_ms IS NULL AND l.unreachable_at_ms IS NULL
      AND EXISTS (SELECT 1 FROM worker_sessions AS s WHERE s.id = l.session_id AND s.expires_at_ms <= $2) RETURNING run_id`,
  /** A renewal from the holder clears the mark: the worker is back and answers for its run. */
  clearUnreachable: `UPDATE run_dispatch_leases SET unreachable_at_ms = NULL
    WHERE run_id = $1 AND fence = $2 AND released_at_ms IS NULL AND unreachable_at_ms IS NOT NULL RETURNING run_id`,
  /** A restarted worker's new session takes over its name's lease (docs/decisions/0272); same fence. */
  rebindLease: `UPDATE run_dispatch_leases SET session_id = $2, unreachable_at_ms = NULL, expires_at_ms = $3::bigint + $4::bigint, updated_at_ms = $3
    WHERE run_id = $1 AND fence = $5 AND released_at_ms IS NULL`,
  /**
   * An earlier session, locked, and ended if it was open (docs/decisions/0360): a pull under it takes
   * the same row lock first (touchSession), so no grant to it can commit after this settles it.
   */
  endEarlierSession: `WITH locked AS (SELECT id, principal, ended_at_ms FROM worker_sessions WHERE id = $1 FOR UPDATE),
      ended AS (UPDATE worker_sessions AS s SET ended_at_ms = GREATEST(s.started_at_ms, ${DB_NOW_MS})
        FROM locked WHERE s.id = locked.id AND locked.ended_at_ms IS NULL AND locked.principal = $2)
    SELECT principal FROM locked`,
  /** The leases an earlier session still holds open: none of them was journaled by its worker. */
  openLeasesOfSession: `SELECT run_id AS "runId", attempt_id AS "attemptId", fence FROM run_dispatch_leases
    WHERE session_id = $1 AND released_at_ms IS NULL ORDER BY run_id LIMIT $2`,
  /**
   * The open leases of a live session that its lease page did not name (docs/decisions/0434): $1
   * the session, $2 the principal, $3 the named run ids, $4 at most this many, in run-id order.
   */
  unnamedLeasesOfSession: `SELECT l.run_id AS "runId", l.attempt_id AS "attemptId", l.fence, r.project_id AS "projectId"
    FROM run_dispatch_leases AS l JOIN worker_sessions AS s ON s.id = l.session_id JOIN runs AS r ON r.id = l.run_id
    WHERE l.session_id = $1 AND s.principal = $2 AND s.ended_at_ms IS NULL AND l.released_at_ms IS NULL
      AND NOT (l.run_id = ANY($3::text[]))
    ORDER BY l.run_id LIMIT $4`,
  /** The open session of this name, locked: an attach or forget reads it. */
  sessionPrincipal: `SELECT principal FROM worker_sessions WHERE id = $1`,
  /**
   * The leases an operator's forget ends (docs/decisions/0271): those the name's sessions hold open,
   * and those already forgotten whose run a crashed forget left active (a retry completes them).
   */
  leasesOfWorker: `SELECT l.run_id AS "runId", l.attempt_id AS "attemptId", l.fence FROM run_dispatch_leases AS l
    JOIN worker_sessions AS s ON s.id = l.session_id JOIN runs AS r ON r.id = l.run_id
    WHERE s.principal = $1 AND (l.released_at_ms IS NULL OR (l.forgotten_at_ms IS NOT NULL AND r.status IN ('queued', 'running')))
    ORDER BY l.run_id LIMIT $2`,
  forgetLease: `UPDATE run_dispatch_leases SET forgotten_at_ms = $2, released_at_ms = COALESCE(released_at_ms, $2), updated_at_ms = $2
    WHERE run_id = $1 AND fence = $3 AND (released_at_ms IS NULL OR forgotten_at_ms IS NOT NULL)`,
  endSessionsOf: `UPDATE worker_sessions SET ended_at_ms = GREATEST(started_at_ms, $2::bigint)
    WHERE principal = $1 AND ended_at_ms IS NULL RETURNING id`,
  insertForgetAudit: `INSERT INTO worker_audit (id, worker_name, action, actor, outcome, revision, created_at_ms)
    SELECT $1, $2, 'forget', $3, $4, COALESCE((SELECT revision FROM cluster_workers WHERE name = $2), 0), $5`,
  ensureWorkerRow: `INSERT INTO cluster_workers (name, admission, revoked_at_ms, software_version, capacity, revision, created_at_ms, updated_at_ms)
    VALUES ($1, 'active', NULL, NULL, NULL, 0, ${DB_NOW_MS}, ${DB_NOW_MS}) ON CONFLICT (name) DO NOTHING`,
  /** The runs of a page whose worker stopped renewing (docs/decisions/0270): the cluster views show them `unreachable`. */
  unreachableOf: `SELECT run_id AS "runId", unreachable_at_ms AS "sinceMs" FROM run_dispatch_leases
    WHERE run_id = ANY($1::text[]) AND released_at_ms IS NULL AND unreachable_at_ms IS NOT NULL`,
  unreachableInProject: `SELECT count(*)::int AS count FROM run_dispatch_leases AS l JOIN runs AS r ON r.id = l.run_id
    WHERE r.project_id = $1 AND l.released_at_ms IS NULL AND l.unreachable_at_ms IS NOT NULL`,
  lockWorkerRow: `SELECT ${DB_NOW_MS} AS "nowMs" FROM cluster_workers WHERE name = $1 FOR UPDATE`,
  lockAttemptFacts: `SELECT status, deadline_at_ms AS "deadlineAtMs" FROM attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE`,
  markAttemptRunning: `UPDATE attempts SET status = 'running', updated_at_ms = $3 WHERE run_id = $1 AND id = $2 AND status = 'claimed'`,
  selectLease: `SELECT ${LEASE_COLUMNS} FROM run_dispatch_leases WHERE run_id = $1`,
  /** The leases of a completion page's runs, $1 text[], in one read (docs/decisions/0432). */
  selectLeases: `SELECT ${LEASE_COLUMNS} FROM run_dispatch_leases WHERE run_id = ANY($1::text[])`,
  /**
   * releaseLease for a page (docs/decisions/0432): $1 runIds, $2 their fences. The page's Runs are
   * locked first, then their leases, each in run-id order (Run → Lease, as every write transaction
   * and a forget's lease order): each one-time filter reads the whole lock before the next step
   * runs. Then each lease is released at its fence.
   */
  releaseLeases: `WITH runs_locked AS MATERIALIZED (SELECT id FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE),
      leases_locked AS MATERIALIZED (SELECT run_id FROM run_dispatch_leases
        WHERE run_id = ANY($1::text[]) AND (SELECT count(*) FROM runs_locked) >= 0 ORDER BY run_id FOR NO KEY UPDATE)
    UPDATE run_dispatch_leases AS l SET released_at_ms = ${DB_NOW_MS}, updated_at_ms = ${DB_NOW_MS}
    FROM unnest($1::text[], $2::bigint[]) AS page(run_id, fence)
    WHERE (SELECT count(*) FROM leases_locked) >= 0 AND l.run_id = page.run_id AND l.fence = page.fence AND l.released_at_ms IS NULL`,
} as const;
