-- 0018 (cluster; PostgreSQL only): a project-wide cancel in one statement (docs/decisions/0320,
-- 0203). It writes what the single cancel writes for each run (PostgresRunStore.requestCancellation
-- and ClusterLeaseStore.cancelIfQueued), for a page of the project's active runtime runs at once:
-- the cancel intent at the database's time with its `run.cancel_requested` event (the run's version
-- and event sequence moved together, as the version CAS does), the pending dispatch of an active
-- attempt, and a still-queued run ended `cancelled` with its `run.terminal` event. An intent that
-- exists is kept and gets no second event; a run that ended is not touched. The intent's UPDATE
-- fires 0016's trigger, so each run's NOTIFY wakes the lease page that waits on it, at commit.
-- Locks: the page's Runs in run-id order, then (through the pending dispatch) Dispatch rows, the
-- order of design/postgres §D7-D8.

-- design/dispatch §2.2 step 3 for a set of runs, as lib/store/dispatch-sql.ts insertPendingDispatchSql
-- writes it for one: the pending dispatch of each cancelled runtime run's active attempt.
CREATE FUNCTION pidfence_insert_pending_dispatches(p_run_ids text[], p_now bigint) RETURNS void LANGUAGE sql AS $$
  INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count,
      next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms,
      blocked_at_ms, created_at_ms, updated_at_ms)
    SELECT r.id, r.project_id, a.id, 'pending', 0, 0, r.cancel_requested_at_ms, NULL, NULL, NULL, NULL, NULL, NULL, p_now, p_now
    FROM runs AS r
    JOIN attempts AS a ON a.run_id = r.id AND a.status IN ('claimed', 'starting', 'running')
    WHERE r.id = ANY (p_run_ids) AND r.owner = 'runtime' AND r.status IN ('queued', 'running') AND r.cancel_requested_at_ms IS NOT NULL
    ORDER BY r.id
    ON CONFLICT (run_id) DO UPDATE SET attempt_id = excluded.attempt_id, version = cancellation_dispatches.version + 1,
      updated_at_ms = excluded.updated_at_ms
    WHERE cancellation_dispatches.status = 'pending' AND cancellation_dispatches.dispatch_count = 0
      AND cancellation_dispatches.attempt_id <> excluded.attempt_id
$$;

CREATE FUNCTION pidfence_cancel_project(p_project_id text, p_reason text, p_limit integer) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint;
  v_ids text[];
  v_requested text[];
  v_ended integer;
BEGIN
  PERFORM pidfence_set_limits();
  v_now := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  -- Runs without intent, and queued runs with it (a repeat ends them): a run that a concurrent cancel
  -- or end changed is read again under its lock and left out when it no longer matches.
  SELECT array_agg(page.id ORDER BY page.id) INTO v_ids FROM (
    SELECT r.id FROM runs AS r
      WHERE r.project_id = p_project_id AND r.owner = 'runtime' AND r.status IN ('queued', 'running')
        AND (r.cancel_requested_at_ms IS NULL OR r.status = 'queued')
      ORDER BY r.id LIMIT p_limit FOR NO KEY UPDATE) AS page;
  v_ids := COALESCE(v_ids, ARRAY[]::text[]);
  WITH written AS (
    UPDATE runs AS r SET cancel_requested_at_ms = v_now, cancel_reason = p_reason, version = r.version + 1,
        next_event_seq = r.next_event_seq + 1, updated_at_ms = v_now
      WHERE r.id = ANY (v_ids) AND r.cancel_requested_at_ms IS NULL
      RETURNING r.id, r.next_event_seq - 1 AS seq
  ), appended AS (
    -- The same text JSON.stringify writes (the payload reads back exactly as written).
    INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
      SELECT w.id, w.seq, 'evt-' || gen_random_uuid(), 'run.cancel_requested',
        format('{"reason":%s}', to_json(p_reason)::text)::json, v_now
      FROM written AS w
      RETURNING run_events.run_id
  )
  SELECT COALESCE(array_agg(a.run_id ORDER BY a.run_id), ARRAY[]::text[]) INTO v_requested FROM appended AS a;
  PERFORM pidfence_insert_pending_dispatches(v_requested, v_now);
  -- A job no worker pulled yet ends at once (nothing runs, nothing to stop), as cancelIfQueued ends one.
  WITH ended AS (
    UPDATE runs AS r SET status = 'cancelled', version = r.version + 1, next_event_seq = r.next_event_seq + 1,
        updated_at_ms = v_now
      WHERE r.id = ANY (v_ids) AND r.status = 'queued' AND r.cancel_requested_at_ms IS NOT NULL
      RETURNING r.id, r.next_event_seq - 1 AS seq
  ), appended AS (
    INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
      SELECT e.id, e.seq, 'evt-' || gen_random_uuid(), 'run.terminal', '{"status":"cancelled"}'::json, v_now
      FROM ended AS e
      RETURNING run_events.run_id
  )
  SELECT count(*) INTO v_ended FROM appended;
  RETURN json_build_object('requested', cardinality(v_requested), 'cancelledQueued', v_ended,
    'more', EXISTS (SELECT 1 FROM runs AS r
      WHERE r.project_id = p_project_id AND r.owner = 'runtime' AND r.status IN ('queued', 'running')
        AND (r.cancel_requested_at_ms IS NULL OR r.status = 'queued')));
END
$$;

REVOKE EXECUTE ON FUNCTION pidfence_insert_pending_dispatches(text[], bigint), pidfence_cancel_project(text, text, integer)
  FROM PUBLIC;
