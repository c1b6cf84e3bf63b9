-- 0020: one plpgsql home for the cancel intent and for a cancelled queued run's end (docs/decisions/0340,
-- as 0231 did for the claim). Migration 0018's project cancel wrote both for a page of runs while
-- PostgresRunStore.requestCancellation and ClusterLeaseStore.cancelIfQueued spelled them again statement
-- by statement; from here on the project cancel calls pidfence_write_cancel_intents and
-- pidfence_end_queued_cancels, and the two single paths call one each with a page of one run.
-- pidfence_cancel_project keeps its name, arguments, JSON outcome and grants (CREATE OR REPLACE keeps a
-- function's privileges). Each caller keeps its treatment of a queued run: the project cancel ends it in
-- its statement, the store's single cancel does not (the cluster's route ends it afterwards, in
-- cancelIfQueued's own transaction).

-- design/execution §5, design/dispatch §2.2 step 3, for runs whose locks the caller holds (lock 1 of
-- design/postgres §D7): each active run without intent gets the intent at p_now with its
-- `run.cancel_requested` event (the id at the run's position in p_event_ids; the version and the event
-- sequence moved together, as the version CAS moves them), then its active attempt's pending dispatch.
-- An intent that exists is kept and gets no second event; an ended run is not touched. The intent's
-- UPDATE fires 0016's trigger (the NOTIFY at commit). Answers the runs written, in run-id order.
CREATE FUNCTION pidfence_write_cancel_intents(p_run_ids text[], p_event_ids text[], p_reason text, p_now bigint)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_written text[];
BEGIN
  WITH written AS (
    UPDATE runs AS r SET cancel_requested_at_ms = p_now, cancel_reason = p_reason, version = r.version + 1,
        next_event_seq = r.next_event_seq + 1, updated_at_ms = p_now
      FROM unnest(p_run_ids, p_event_ids) AS c(run_id, event_id)
      WHERE r.id = c.run_id AND r.status IN ('queued', 'running') AND r.cancel_requested_at_ms IS NULL
      RETURNING r.id, r.next_event_seq - 1 AS seq, c.event_id
  ), appended AS (
    -- The same text JSON.stringify writes (the payload reads back exactly as written).
    INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
      SELECT w.id, w.seq, w.event_id, 'run.cancel_requested', format('{"reason":%s}', to_json(p_reason)::text)::json, p_now
      FROM written AS w
      RETURNING run_events.run_id
  )
  SELECT COALESCE(array_agg(a.run_id ORDER BY a.run_id), ARRAY[]::text[]) INTO v_written FROM appended AS a;
  PERFORM pidfence_insert_pending_dispatches(v_written, p_now);
  RETURN v_written;
END
$$;

-- A job no worker pulled yet ends at once (nothing runs, nothing to stop): each queued run with intent
-- among runs whose locks the caller holds, or that the UPDATE locks (a pull locks the run first too, so
-- the two never both win), ends `cancelled` with its `run.terminal` event. Answers how many ended.
CREATE FUNCTION pidfence_end_queued_cancels(p_run_ids text[], p_now bigint) RETURNS integer LANGUAGE sql AS $$
  WITH ended AS (
    UPDATE runs AS r SET status = 'cancelled', version = r.version + 1, next_event_seq = r.next_event_seq + 1,
        updated_at_ms = p_now
      WHERE r.id = ANY (p_run_ids) AND r.status = 'queued' AND r.cancel_requested_at_ms IS NOT NULL
      RETURNING r.id, r.next_event_seq - 1 AS seq
  ), appended AS (
    INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
      SELECT e.id, e.seq, 'evt-' || gen_random_uuid(), 'run.terminal', '{"status":"cancelled"}'::json, p_now
      FROM ended AS e
      RETURNING run_events.run_id
  )
  SELECT count(*)::integer FROM appended
$$;

-- PostgresRunStore.requestCancellation: one run, any owner, a page of one. The outcome says why nothing
-- was written (no run, an ended run, an intent already there); `run` is the row as the outcome leaves
-- it, and `seq` the sequence of the event written (requested only).
CREATE FUNCTION pidfence_request_cancel(p_run_id text, p_reason text, p_event_id text)
RETURNS TABLE (kind text, run runs, seq bigint, now_ms bigint) LANGUAGE plpgsql AS $$
DECLARE
  v_run runs%ROWTYPE;
BEGIN
  PERFORM pidfence_set_limits();
  now_ms := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  SELECT * INTO v_run FROM runs AS r WHERE r.id = p_run_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    kind := 'run_missing';
  ELSIF cardinality(pidfence_write_cancel_intents(ARRAY[p_run_id], ARRAY[p_event_id], p_reason, now_ms)) = 1 THEN
    SELECT * INTO v_run FROM runs AS r WHERE r.id = p_run_id;
    kind := 'requested';
    seq := v_run.next_event_seq - 1;
    run := v_run;
  ELSIF v_run.status IN ('queued', 'running') THEN
    kind := 'already_requested';
    run := v_run;
  ELSE
    kind := 'run_terminal';
  END IF;
  RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION pidfence_cancel_project(p_project_id text, p_reason text, p_limit integer) RETURNS json
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
  v_requested := pidfence_write_cancel_intents(v_ids,
    ARRAY(SELECT 'evt-' || gen_random_uuid() FROM unnest(v_ids)), p_reason, v_now);
  v_ended := pidfence_end_queued_cancels(v_ids, v_now);
  RETURN json_build_object('requested', cardinality(v_requested), 'cancelledQueued', v_ended,
    'more', EXISTS (SELECT 1 FROM runs AS r
      WHERE r.project_id = p_project_id AND r.owner = 'runtime' AND r.status IN ('queued', 'running')
        AND (r.cancel_requested_at_ms IS NULL OR r.status = 'queued')));
END
$$;

REVOKE EXECUTE ON FUNCTION pidfence_write_cancel_intents(text[], text[], text, bigint),
  pidfence_end_queued_cancels(text[], bigint), pidfence_request_cancel(text, text, text) FROM PUBLIC;
