-- 0012: a page claim and a page settle as set-based functions (docs/decisions/0024), and a due page
-- claimed as it is read (docs/decisions/0025). The page functions decide every row exactly as
-- pidfence_claim / pidfence_record_result of 0007 decide one, but in a few statements for the
-- whole page instead of five or six per row. Locks: every Run of the page in run-id order, then
-- every Attempt, then every Dispatch, so a page never holds a lower level while waiting for a
-- higher one (design/postgres §D7-D8). A write the row locks make impossible raises, and the whole
-- page rolls back.

-- The first steps of both: the transaction limits, then every Run of the page in run-id order, then
-- every Attempt; answers the database time of the transaction.
CREATE FUNCTION pidfence_lock_page(p_run_ids text[], p_attempt_ids text[]) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pidfence_set_limits();
  PERFORM 1 FROM runs WHERE id = ANY (p_run_ids) ORDER BY id FOR NO KEY UPDATE;
  PERFORM 1 FROM attempts AS a JOIN unnest(p_run_ids, p_attempt_ids) AS t(run_id, attempt_id)
      ON a.run_id = t.run_id AND a.id = t.attempt_id
    ORDER BY a.run_id FOR NO KEY UPDATE OF a;
  RETURN floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
END
$$;

CREATE FUNCTION pidfence_claim_page(p_run_ids text[], p_attempt_ids text[], p_cancel_requested_at_ms bigint[],
    p_owner text, p_digests text[], p_lease_duration_ms bigint) RETURNS TABLE ("runId" text, outcome json)
LANGUAGE plpgsql AS $$
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
    LEFT JOIN cancellation_dispatches AS d ON d.run_id = i.run_id
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
    -- The version CAS; the due/expiry rule is repeated so a stale read can never lease.
    UPDATE cancellation_dispatches AS d
      SET status = 'leased', version = d.version + 1, dispatch_count = d.dispatch_count + 1, next_attempt_at_ms = NULL,
          lease_owner = p_owner, lease_token_digest = x.digest, lease_expires_at_ms = v_now + p_lease_duration_ms,
          last_dispatched_at_ms = v_now, updated_at_ms = v_now
      FROM decided AS x
      WHERE x.verdict = 'update' AND d.run_id = x.run_id AND d.attempt_id = x.attempt_id AND d.version = x.existing_version
        AND ((d.status IN ('pending', 'retry_wait') AND d.next_attempt_at_ms <= v_now)
          OR (d.status = 'leased' AND d.lease_expires_at_ms <= v_now))
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

-- A due page claimed in the statement that read it (docs/decisions/0025): the runs of the due items
-- that another transaction holds are passed over, never waited for, so supervisors sharing the store
-- take disjoint items; the rest is pidfence_claim_page. Taking the run locks with SKIP LOCKED waits
-- for nothing, so it cannot add a wait to the lock order.
CREATE FUNCTION pidfence_claim_due_page(p_run_ids text[], p_attempt_ids text[], p_cancel_requested_at_ms bigint[],
    p_owner text, p_digests text[], p_lease_duration_ms bigint) RETURNS TABLE ("runId" text, outcome json)
LANGUAGE plpgsql AS $$
DECLARE
  v_taken text[];
  v_run_ids text[];
  v_attempt_ids text[];
  v_cancel_requested_at_ms bigint[];
  v_digests text[];
BEGIN
  PERFORM pidfence_set_limits();
  SELECT array_agg(r.id) INTO v_taken
    FROM (SELECT id FROM runs WHERE id = ANY (p_run_ids) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED) AS r;
  IF v_taken IS NULL THEN
    RETURN;
  END IF;
  -- The i-th due item keeps the i-th digest, whichever items were passed over.
  SELECT array_agg(c.run_id ORDER BY c.ord), array_agg(c.attempt_id ORDER BY c.ord),
         array_agg(c.cancel_requested_at_ms ORDER BY c.ord), array_agg(c.digest ORDER BY c.ord)
    INTO v_run_ids, v_attempt_ids, v_cancel_requested_at_ms, v_digests
    FROM unnest(p_run_ids, p_attempt_ids, p_cancel_requested_at_ms, p_digests)
      WITH ORDINALITY AS c(run_id, attempt_id, cancel_requested_at_ms, digest, ord)
    WHERE c.run_id = ANY (v_taken);
  RETURN QUERY SELECT * FROM pidfence_claim_page(v_run_ids, v_attempt_ids, v_cancel_requested_at_ms, p_owner, v_digests, p_lease_duration_ms);
END
$$;

CREATE FUNCTION pidfence_record_results(p_run_ids text[], p_attempt_ids text[], p_owners text[], p_digests text[],
    p_expected_versions bigint[], p_statuses text[], p_results text[], p_retry_delays_ms bigint[], p_blocked boolean[],
    p_event_ids text[], p_event_types text[]) RETURNS TABLE ("runId" text, outcome json)
LANGUAGE plpgsql AS $$
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
    UPDATE cancellation_dispatches AS d
      SET status = i.status, version = d.version + 1, last_result = i.result,
          next_attempt_at_ms = CASE WHEN i.retry_delay_ms IS NULL THEN NULL ELSE v_now + i.retry_delay_ms END,
          blocked_at_ms = CASE WHEN i.blocked THEN v_now END,
          lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL, updated_at_ms = v_now
      FROM input AS i
      WHERE d.run_id = i.run_id AND d.attempt_id = i.attempt_id AND d.status = 'leased'
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

-- Only the roles grantRuntime() names may call them (PostgreSQL grants EXECUTE to PUBLIC by default).
REVOKE EXECUTE ON FUNCTION
  pidfence_lock_page(text[], text[]),
  pidfence_claim_page(text[], text[], bigint[], text, text[], bigint),
  pidfence_claim_due_page(text[], text[], bigint[], text, text[], bigint),
  pidfence_record_results(text[], text[], text[], text[], bigint[], text[], text[], bigint[], boolean[], text[], text[])
  FROM PUBLIC;
