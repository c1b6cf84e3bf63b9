-- 0016 (cluster; PostgreSQL only): liveness per worker and one lease-control statement per worker
-- tick (docs/decisions/0200). The session row carries the heartbeat: its expires_at_ms is extended
-- by every tick of a live session and never after it lapsed holding leases, and a lease lives while its session
-- does. Lease rows are written on changes of state only (grant, release), no longer on every
-- renewal. pidfence_lease_tick answers every lease a worker holds in one statement and returns only
-- what is not a plain renewal; a committed cancel wakes the replica a worker waits on by NOTIFY.

ALTER TABLE worker_sessions ADD COLUMN expires_at_ms bigint;

-- An open session keeps the liveness its leases had: the latest expiry of its unreleased leases.
UPDATE worker_sessions AS s SET expires_at_ms = GREATEST(s.last_seen_at_ms,
  COALESCE((SELECT max(l.expires_at_ms) FROM run_dispatch_leases AS l WHERE l.session_id = s.id AND l.released_at_ms IS NULL), 0));

ALTER TABLE worker_sessions ALTER COLUMN expires_at_ms SET NOT NULL;
ALTER TABLE worker_sessions ADD CONSTRAINT worker_sessions_expires_at_ms_check CHECK (expires_at_ms >= 0);

-- Lapsed sessions, found by the set-based reap without a scan of every session.
CREATE INDEX worker_sessions_by_expiry ON worker_sessions (expires_at_ms, id);
-- The open leases of one session: the reap of a lapsed session and a drain read them by session.
CREATE INDEX run_dispatch_leases_by_session ON run_dispatch_leases (session_id, run_id) WHERE released_at_ms IS NULL;

-- One lease-control tick for every lease of one worker (docs/decisions/0200). The first row (runId
-- NULL) is the session's: `live` with its new expiry, `lapsed` (open, but its heartbeat ran out
-- while it held leases: no lease of it renews) or `lost` (missing, ended, or another principal's). Then one row per lease
-- that is not a plain renewal, decided as the single-lease tick of 0009 decided it. Locks: the
-- session row, then the Runs of the leases that end here in run-id order, then their lease rows
-- (design/postgres §D7); a plain renewal writes nothing but the session.
CREATE FUNCTION pidfence_lease_tick(p_session_id text, p_principal text, p_run_ids text[], p_attempt_ids text[],
    p_fences bigint[], p_lease_duration_ms bigint) RETURNS TABLE ("runId" text, answer json)
LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint;
  v_expires bigint;
  v_state text;
  v_run_ids text[];
  v_fences bigint[];
  v_verdicts text[];
  v_stop_at_ms bigint[];
BEGIN
  PERFORM pidfence_set_limits();
  v_now := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  -- A lapsed session comes back only when it holds no open lease: a lapsed lease never lives again.
  UPDATE worker_sessions AS s SET last_seen_at_ms = GREATEST(s.last_seen_at_ms, v_now),
      expires_at_ms = GREATEST(s.expires_at_ms, v_now + p_lease_duration_ms)
    WHERE s.id = p_session_id AND s.principal = p_principal AND s.ended_at_ms IS NULL AND (s.expires_at_ms > v_now
      OR NOT EXISTS (SELECT 1 FROM run_dispatch_leases AS l WHERE l.session_id = s.id AND l.released_at_ms IS NULL))
    RETURNING s.expires_at_ms INTO v_expires;
  IF FOUND THEN
    v_state := 'live';
  ELSE
    SELECT 'lapsed', expires_at_ms INTO v_state, v_expires FROM worker_sessions
      WHERE id = p_session_id AND principal = p_principal AND ended_at_ms IS NULL;
    v_state := COALESCE(v_state, 'lost');
  END IF;
  RETURN QUERY SELECT NULL::text, json_build_object('kind', v_state, 'expiresAtMs', v_expires, 'nowMs', v_now);
  IF v_state = 'lost' THEN
    RETURN QUERY SELECT t.run_id, json_build_object('kind', 'lost', 'reason', 'session') FROM unnest(p_run_ids) AS t(run_id);
    RETURN;
  END IF;
  SELECT array_agg(i.run_id), array_agg(i.fence), array_agg(CASE
        WHEN r.id IS NULL OR a.id IS NULL OR l.run_id IS NULL THEN 'lost:fence'
        WHEN l.session_id <> p_session_id OR l.attempt_id <> i.attempt_id OR l.fence <> i.fence THEN 'lost:fence'
        WHEN a.status NOT IN ('claimed', 'starting', 'running') OR r.status NOT IN ('queued', 'running') THEN 'terminal'
        WHEN l.released_at_ms IS NOT NULL OR v_state = 'lapsed' THEN 'lost:expired'
        WHEN r.cancel_requested_at_ms IS NOT NULL THEN 'stop:run'
        WHEN a.deadline_at_ms IS NOT NULL AND a.deadline_at_ms <= v_now THEN 'stop:attempt'
        ELSE 'renewed'
      END), array_agg(COALESCE(r.cancel_requested_at_ms, a.deadline_at_ms))
    INTO v_run_ids, v_fences, v_verdicts, v_stop_at_ms
    FROM unnest(p_run_ids, p_attempt_ids, p_fences) AS i(run_id, attempt_id, fence)
    LEFT JOIN runs AS r ON r.id = i.run_id
    LEFT JOIN attempts AS a ON a.run_id = i.run_id AND a.id = i.attempt_id
    LEFT JOIN run_dispatch_leases AS l ON l.run_id = i.run_id;
  -- A lease whose run or attempt ended is released (a state change): Run locks first, then the lease.
  PERFORM 1 FROM runs WHERE id IN (SELECT t.run_id FROM unnest(v_run_ids, v_verdicts) AS t(run_id, verdict) WHERE t.verdict = 'terminal')
    ORDER BY id FOR NO KEY UPDATE;
  UPDATE run_dispatch_leases AS l SET released_at_ms = v_now, updated_at_ms = GREATEST(l.updated_at_ms, v_now)
    FROM unnest(v_run_ids, v_fences, v_verdicts) AS t(run_id, fence, verdict)
    WHERE t.verdict = 'terminal' AND l.run_id = t.run_id AND l.fence = t.fence AND l.released_at_ms IS NULL;
  RETURN QUERY SELECT t.run_id, CASE
      WHEN t.verdict LIKE 'lost:%' THEN json_build_object('kind', 'lost', 'reason', substr(t.verdict, 6))
      WHEN t.verdict LIKE 'stop:%' THEN json_build_object('kind', 'stop_requested', 'scope', substr(t.verdict, 6),
        'stopAtMs', t.stop_at_ms, 'expiresAtMs', v_expires)
      ELSE json_build_object('kind', t.verdict)
    END
    FROM unnest(v_run_ids, v_verdicts, v_stop_at_ms) AS t(run_id, verdict, stop_at_ms) WHERE t.verdict <> 'renewed';
END
$$;

-- The open leases of lapsed sessions, oldest lapse first, at most p_limit: the reap ends each as
-- the reap of 0009 did (docs/decisions/0200). Read only; the reap's own transactions lock and write.
CREATE FUNCTION pidfence_lapsed_leases(p_limit integer) RETURNS TABLE ("runId" text, "attemptId" text, fence bigint)
LANGUAGE sql STABLE AS $$
  SELECT l.run_id, l.attempt_id, l.fence
    FROM worker_sessions AS s JOIN run_dispatch_leases AS l ON l.session_id = s.id AND l.released_at_ms IS NULL
    WHERE s.expires_at_ms <= floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint
    ORDER BY s.expires_at_ms, l.run_id LIMIT p_limit
$$;

-- A committed cancel intent wakes the replica whose worker holds the run (docs/decisions/0201): the
-- payload is the run id only, delivered at commit to the replicas that LISTEN.
CREATE FUNCTION pidfence_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('pidfence_cancel', NEW.id);
  RETURN NULL;
END
$$;

CREATE TRIGGER runs_cancel_requested_notify AFTER UPDATE OF cancel_requested_at_ms ON runs
  FOR EACH ROW WHEN (OLD.cancel_requested_at_ms IS NULL AND NEW.cancel_requested_at_ms IS NOT NULL)
  EXECUTE FUNCTION pidfence_notify_cancel();

REVOKE EXECUTE ON FUNCTION
  pidfence_lease_tick(text, text, text[], text[], bigint[], bigint),
  pidfence_lapsed_leases(integer),
  pidfence_notify_cancel()
  FROM PUBLIC;
