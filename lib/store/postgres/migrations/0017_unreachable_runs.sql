-- 0017 (cluster; PostgreSQL only): a run whose worker stopped answering is `unreachable`, not failed
-- (docs/decisions/0270). The lease keeps its session and fence and is only marked; the run and its
-- attempt stay active, so a cancel is still taken and waits for the worker's return. The run ends
-- when the worker proves its end (a completion under the fence) or when an operator forgets the
-- worker (docs/decisions/0271): then the lease says so, and a late report is refused by it.

ALTER TABLE run_dispatch_leases ADD COLUMN unreachable_at_ms bigint;
ALTER TABLE run_dispatch_leases ADD COLUMN forgotten_at_ms bigint;
ALTER TABLE run_dispatch_leases ADD CONSTRAINT run_dispatch_leases_unreachable_check
  CHECK ((unreachable_at_ms IS NULL OR unreachable_at_ms >= 0) AND (forgotten_at_ms IS NULL OR (forgotten_at_ms >= 0 AND released_at_ms IS NOT NULL)));

-- The reap's page: expired leases not yet marked. Marked ones wait for their worker or an operator.
CREATE INDEX run_dispatch_leases_expired_unmarked ON run_dispatch_leases (expires_at_ms, run_id)
  WHERE released_at_ms IS NULL AND unreachable_at_ms IS NULL;
-- The status card and the metric count unreachable runs; forget finds a worker's open leases by
-- session through 0016's run_dispatch_leases_by_session.
CREATE INDEX run_dispatch_leases_unreachable ON run_dispatch_leases (unreachable_at_ms)
  WHERE released_at_ms IS NULL AND unreachable_at_ms IS NOT NULL;

ALTER TABLE run_events DROP CONSTRAINT run_events_type_check;
ALTER TABLE run_events ADD CONSTRAINT run_events_type_check CHECK (type IN ('run.cancel_requested', 'run.cancel_dispatched',
  'run.cancel_dispatch_blocked', 'run.cancel_dispatch_failed', 'run.cancel_dispatch_rearmed', 'run.terminal',
  'run.unreachable', 'run.reattached'));

ALTER TABLE worker_audit DROP CONSTRAINT worker_audit_action_check;
ALTER TABLE worker_audit ADD CONSTRAINT worker_audit_action_check
  CHECK (action IN ('cordon', 'drain', 'uncordon', 'revoke', 'reinstate', 'forget'));

-- Opt-in per job (docs/decisions/0273): its worker stops it after this long without a renewal,
-- counted on the worker's monotonic clock. NULL: an outage never stops the job.
ALTER TABLE cluster_jobs ADD COLUMN stop_after_disconnect_ms bigint;
ALTER TABLE cluster_jobs ADD CONSTRAINT cluster_jobs_stop_after_disconnect_ms_check CHECK (stop_after_disconnect_ms BETWEEN 1000 AND 86400000);

-- The lease page of 0016 carries the rules above (docs/decisions/0275): an open session renews also
-- after its heartbeat lapsed, and so does each lease its fence holder names, unless the lease was
-- released (`lost/expired`) or forgotten (`lost/forgotten`, decided before the session is). A renewed
-- lease still marked unreachable is named (`reattach`): the caller clears the mark and writes the
-- run's `run.reattached` event. The reap reads only unmarked leases and never ends a run.
CREATE OR REPLACE FUNCTION pidfence_lease_tick(p_session_id text, p_principal text, p_run_ids text[], p_attempt_ids text[],
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
  v_marked boolean[];
BEGIN
  PERFORM pidfence_set_limits();
  v_now := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  UPDATE worker_sessions AS s SET last_seen_at_ms = GREATEST(s.last_seen_at_ms, v_now),
      expires_at_ms = GREATEST(s.expires_at_ms, v_now + p_lease_duration_ms)
    WHERE s.id = p_session_id AND s.principal = p_principal AND s.ended_at_ms IS NULL
    RETURNING s.expires_at_ms INTO v_expires;
  v_state := CASE WHEN FOUND THEN 'live' ELSE 'lost' END;
  RETURN QUERY SELECT NULL::text, json_build_object('kind', v_state, 'expiresAtMs', v_expires, 'nowMs', v_now);
  SELECT array_agg(i.run_id), array_agg(i.fence), array_agg(CASE
        WHEN l.run_id IS NOT NULL AND l.attempt_id = i.attempt_id AND l.fence = i.fence AND l.forgotten_at_ms IS NOT NULL THEN 'lost:forgotten'
        WHEN v_state = 'lost' THEN 'lost:session'
        WHEN r.id IS NULL OR a.id IS NULL OR l.run_id IS NULL THEN 'lost:fence'
        WHEN l.session_id <> p_session_id OR l.attempt_id <> i.attempt_id OR l.fence <> i.fence THEN 'lost:fence'
        WHEN a.status NOT IN ('claimed', 'starting', 'running') OR r.status NOT IN ('queued', 'running') THEN 'terminal'
        WHEN l.released_at_ms IS NOT NULL THEN 'lost:expired'
        WHEN r.cancel_requested_at_ms IS NOT NULL THEN 'stop:run'
        WHEN a.deadline_at_ms IS NOT NULL AND a.deadline_at_ms <= v_now THEN 'stop:attempt'
        ELSE 'renewed'
      END), array_agg(COALESCE(r.cancel_requested_at_ms, a.deadline_at_ms)), array_agg(COALESCE(l.unreachable_at_ms IS NOT NULL, false))
    INTO v_run_ids, v_fences, v_verdicts, v_stop_at_ms, v_marked
    FROM unnest(p_run_ids, p_attempt_ids, p_fences) AS i(run_id, attempt_id, fence)
    LEFT JOIN runs AS r ON r.id = i.run_id
    LEFT JOIN attempts AS a ON a.run_id = i.run_id AND a.id = i.attempt_id
    LEFT JOIN run_dispatch_leases AS l ON l.run_id = i.run_id;
  PERFORM 1 FROM runs WHERE id IN (SELECT t.run_id FROM unnest(v_run_ids, v_verdicts) AS t(run_id, verdict) WHERE t.verdict = 'terminal')
    ORDER BY id FOR NO KEY UPDATE;
  UPDATE run_dispatch_leases AS l SET released_at_ms = v_now, updated_at_ms = GREATEST(l.updated_at_ms, v_now)
    FROM unnest(v_run_ids, v_fences, v_verdicts) AS t(run_id, fence, verdict)
    WHERE t.verdict = 'terminal' AND l.run_id = t.run_id AND l.fence = t.fence AND l.released_at_ms IS NULL;
  RETURN QUERY SELECT t.run_id, CASE
      WHEN t.verdict LIKE 'lost:%' THEN json_build_object('kind', 'lost', 'reason', substr(t.verdict, 6))
      WHEN t.verdict LIKE 'stop:%' THEN json_build_object('kind', 'stop_requested', 'scope', substr(t.verdict, 6),
        'stopAtMs', t.stop_at_ms, 'expiresAtMs', v_expires, 'reattach', t.marked)
      WHEN t.verdict = 'renewed' THEN json_build_object('kind', 'renewed', 'expiresAtMs', v_expires, 'reattach', true)
      ELSE json_build_object('kind', t.verdict)
    END
    FROM unnest(v_run_ids, v_verdicts, v_stop_at_ms, v_marked) AS t(run_id, verdict, stop_at_ms, marked)
    WHERE t.verdict <> 'renewed' OR t.marked;
END
$$;

CREATE OR REPLACE FUNCTION pidfence_lapsed_leases(p_limit integer) RETURNS TABLE ("runId" text, "attemptId" text, fence bigint)
LANGUAGE sql STABLE AS $$
  SELECT l.run_id, l.attempt_id, l.fence
    FROM worker_sessions AS s JOIN run_dispatch_leases AS l ON l.session_id = s.id
      AND l.released_at_ms IS NULL AND l.unreachable_at_ms IS NULL
    WHERE s.expires_at_ms <= floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint
    ORDER BY s.expires_at_ms, l.run_id LIMIT p_limit
$$;
