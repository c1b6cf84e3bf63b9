-- 0023: a stop page finds its dispatch rows by their key (docs/decisions/0448). The page claim and
-- the page settle of 0012 named the rows' status in their UPDATE: the settle `status = 'leased'`,
-- the claim the due/expiry rule again. With statistics kept while few rows are leased, the planner
-- then read every leased or due row of the table through cancellation_dispatches_due and matched
-- each against the page: in a fleet's project cancel, thousands of rows for a page of 50, and the
-- settle took 130-190 ms. Statistics taken while the table was empty made the claim read the
-- whole table instead. Now every read of the dispatch table names the page's run ids, neither
-- UPDATE names a status (the claim's verdict decided the rule under the row lock and the version
-- CAS holds it; the settle's token digest exists only on a leased row), and the functions plan
-- without sequential scans, so each row of the page is found by its key whatever the statistics
-- say (the page's lock_page runs under the same setting). Same decisions, same answers.

CREATE OR REPLACE FUNCTION pidfence_claim_page(p_run_ids text[], p_attempt_ids text[], p_cancel_requested_at_ms bigint[],
    p_owner text, p_digests text[], p_lease_duration_ms bigint) RETURNS TABLE ("runId" text, outcome json)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_now bigint;
  v_ids text[];
  v_outcomes json[];
BEGIN
  v_now := pidfence_lock_page(p_run_ids, p_attempt_ids);
  PERFORM 1 FROM cancellation_dispatches WHERE run_id = ANY (p_run_ids) ORDER BY run_id FOR NO KEY UPDATE;
  WITH input AS (
    SELECT * FROM unnest(p_run_ids, p_attempt_ids, p_cancel_requested_at_ms, p_digests)
      AS t(run_id, attempt_id, cancel_requested_at_ms, digest)
  ), decided AS (
    -- The checks in the order of pidfence_claim: eligibility first, then the existing row's blockers.
    SELECT i.run_id, i.attempt_id, i.digest, r.project_id, d.version AS existing_version, CASE
        WHEN r.id IS NULL THEN 'not_eligible:run_missing'
        WHEN r.owner <> 'runtime' THEN 'not_eligible:run_not_runtime'
        WHEN r.status NOT IN ('queued', 'running') THEN 'not_eligible:run_terminal'
        WHEN r.cancel_requested_at_ms IS NULL THEN 'not_eligible:cancel_not_requested'
        WHEN r.cancel_requested_at_ms <> i.cancel_requested_at_ms THEN 'not_eligible:cancel_mismatch'
        WHEN a.status IS NULL THEN 'not_eligible:attempt_missing'
        WHEN a.status NOT IN ('claimed', 'starting', 'running') THEN 'not_eligible:attempt_inactive'
        WHEN d.run_id IS NULL THEN 'insert'
        WHEN d.attempt_id <> i.attempt_id THEN 'attempt_conflict'
        WHEN d.status IN ('dispatched', 'blocked') THEN d.status
        WHEN d.status = 'leased' AND COALESCE(d.lease_expires_at_ms, 0) > v_now THEN 'leased'
        WHEN d.status IN ('pending', 'retry_wait') AND COALESCE(d.next_attempt_at_ms, 0) > v_now THEN 'not_due'
        ELSE 'update'
      END AS verdict
    FROM input AS i
    LEFT JOIN runs AS r ON r.id = i.run_id
    LEFT JOIN attempts AS a ON a.run_id = i.run_id AND a.id = i.attempt_id
    LEFT JOIN cancellation_dispatches AS d ON d.run_id = i.run_id AND d.run_id = ANY (p_run_ids)
  ), inserted AS (
    -- A first claim writes the leased row directly.
    INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version,
        dispatch_count, next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result,
        last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
      SELECT x.run_id, x.project_id, x.attempt_id, 'leased', 1, 1, NULL, p_owner, x.digest,
        v_now + p_lease_duration_ms, NULL, v_now, NULL, v_now, v_now
      FROM decided AS x WHERE x.verdict = 'insert'
      RETURNING cancellation_dispatches.run_id, pidfence_dispatch_json(cancellation_dispatches) AS record
  ), updated AS (
    -- The version CAS on the row the verdict read under its lock: the due/expiry rule is decided once,
    -- above, and no status is named here, so the row is found by its key alone.
    UPDATE cancellation_dispatches AS d
      SET status = 'leased', version = d.version + 1, dispatch_count = d.dispatch_count + 1, next_attempt_at_ms = NULL,
          lease_owner = p_owner, lease_token_digest = x.digest, lease_expires_at_ms = v_now + p_lease_duration_ms,
          last_dispatched_at_ms = v_now, updated_at_ms = v_now
      FROM decided AS x
      WHERE x.verdict = 'update' AND d.run_id = ANY (p_run_ids) AND d.run_id = x.run_id AND d.attempt_id = x.attempt_id
        AND d.version = x.existing_version
      RETURNING d.run_id, pidfence_dispatch_json(d) AS record
  ), written AS (
    SELECT * FROM inserted UNION ALL SELECT * FROM updated
  )
  SELECT array_agg(x.run_id), array_agg(CASE
      WHEN x.verdict LIKE 'not_eligible:%' THEN json_build_object('kind', 'not_eligible', 'reason', substr(x.verdict, 14))
      WHEN x.verdict IN ('insert', 'update') THEN
        CASE WHEN w.run_id IS NULL THEN NULL ELSE json_build_object('kind', 'claimed', 'record', w.record) END
      ELSE json_build_object('kind', x.verdict)
    END)
    INTO v_ids, v_outcomes
  FROM decided AS x LEFT JOIN written AS w ON w.run_id = x.run_id;
  IF array_position(v_outcomes, NULL) IS NOT NULL THEN
    -- Impossible while we hold the row locks, unless something wrote a row outside pidfence.
    RAISE EXCEPTION 'lease CAS lost under the row lock' USING ERRCODE = 'P0001';
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_outcomes);
END
$$;

CREATE OR REPLACE FUNCTION pidfence_record_results(p_run_ids text[], p_attempt_ids text[], p_owners text[], p_digests text[],
    p_expected_versions bigint[], p_statuses text[], p_results text[], p_retry_delays_ms bigint[], p_blocked boolean[],
    p_event_ids text[], p_event_types text[]) RETURNS TABLE ("runId" text, outcome json)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_now bigint;
  v_ids text[];
  v_outcomes json[];
BEGIN
  v_now := pidfence_lock_page(p_run_ids, p_attempt_ids);
  WITH input AS (
    SELECT * FROM unnest(p_run_ids, p_attempt_ids, p_owners, p_digests, p_expected_versions, p_statuses, p_results,
        p_retry_delays_ms, p_blocked, p_event_ids, p_event_types)
      AS t(run_id, attempt_id, owner, digest, expected_version, status, result, retry_delay_ms, blocked, event_id, event_type)
  ), settled AS (
    -- The fenced settle: a row whose run or attempt is gone, or whose lease is not this claim's, stays as it is.
    -- Only a leased row has a token digest (0002's shape checks): the digest's match is the lease's.
    UPDATE cancellation_dispatches AS d
      SET status = i.status, version = d.version + 1, last_result = i.result,
          next_attempt_at_ms = CASE WHEN i.retry_delay_ms IS NULL THEN NULL ELSE v_now + i.retry_delay_ms END,
          blocked_at_ms = CASE WHEN i.blocked THEN v_now END,
          lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL, updated_at_ms = v_now
      FROM input AS i
      WHERE d.run_id = ANY (p_run_ids) AND d.run_id = i.run_id AND d.attempt_id = i.attempt_id
        AND d.lease_owner = i.owner AND d.lease_token_digest = i.digest AND d.version = i.expected_version
        AND EXISTS (SELECT 1 FROM runs AS r WHERE r.id = i.run_id)
        AND EXISTS (SELECT 1 FROM attempts AS a WHERE a.run_id = i.run_id AND a.id = i.attempt_id)
      RETURNING d.run_id, d.attempt_id, d.dispatch_count, pidfence_dispatch_json(d) AS record,
        i.result, i.event_id, i.event_type
  ), bumped AS (
    -- The run version CAS that reserves each settled run's event sequence.
    UPDATE runs AS r SET version = r.version + 1, next_event_seq = r.next_event_seq + 1, updated_at_ms = v_now
      FROM settled AS s WHERE r.id = s.run_id
      RETURNING r.id AS run_id, r.next_event_seq - 1 AS seq
  ), appended AS (
    -- The same text JSON.stringify writes (the payload reads back exactly as written).
    INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
      SELECT s.run_id, b.seq, s.event_id, s.event_type,
        format('{"attemptId":%s,"dispatchCount":%s,"result":%s}',
          to_json(s.attempt_id)::text, s.dispatch_count, to_json(s.result)::text)::json, v_now
      FROM settled AS s JOIN bumped AS b ON b.run_id = s.run_id
      RETURNING run_events.run_id, run_events.seq
  )
  SELECT array_agg(i.run_id), array_agg(CASE
      WHEN s.run_id IS NULL THEN json_build_object('kind', 'stale_fence')
      WHEN e.run_id IS NULL THEN NULL
      ELSE json_build_object('kind', 'recorded', 'record', s.record, 'seq', e.seq, 'nowMs', v_now)
    END)
    INTO v_ids, v_outcomes
  FROM input AS i LEFT JOIN settled AS s ON s.run_id = i.run_id LEFT JOIN appended AS e ON e.run_id = i.run_id;
  IF array_position(v_outcomes, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'the run changed inside a write transaction' USING ERRCODE = 'P0001';
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_outcomes);
END
$$;
