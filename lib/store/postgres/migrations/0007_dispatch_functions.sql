-- 0007: claim and recordResult as server-side functions, so each is one round trip
-- (docs/decisions/0021). They do exactly what the statement-by-statement transaction did: the
-- transaction limits first, then Run → Attempt → Dispatch row locks, the fences in the WHERE
-- clauses, transaction_timestamp() as the only clock, and a typed outcome as JSON. SECURITY
-- INVOKER (the default): they run with the caller's table privileges, and the runtime role gains
-- only EXECUTE on them.

-- The limits of lib/store/postgres/transaction.ts, local to the calling transaction.
CREATE FUNCTION pidfence_set_limits() RETURNS void LANGUAGE sql AS $$
  SELECT set_config('statement_timeout', '5s', true), set_config('lock_timeout', '1s', true),
         set_config('idle_in_transaction_session_timeout', '10s', true)
$$;

-- A dispatch row in the shape of CancellationDispatchRecord (the names the TypeScript side reads).
CREATE FUNCTION pidfence_dispatch_json(d cancellation_dispatches) RETURNS json LANGUAGE sql STABLE AS $$
  SELECT json_build_object('runId', d.run_id, 'projectId', d.project_id, 'attemptId', d.attempt_id,
    'status', d.status, 'version', d.version, 'dispatchCount', d.dispatch_count,
    'nextAttemptAtMs', d.next_attempt_at_ms, 'leaseOwner', d.lease_owner,
    'leaseTokenDigest', d.lease_token_digest, 'leaseExpiresAtMs', d.lease_expires_at_ms,
    'lastResult', d.last_result, 'lastDispatchedAtMs', d.last_dispatched_at_ms,
    'blockedAtMs', d.blocked_at_ms, 'createdAtMs', d.created_at_ms, 'updatedAtMs', d.updated_at_ms)
$$;

-- design/dispatch §2.2 steps 1-6; the checks in the order of claimIneligibility() and existingRecordBlocker().
CREATE FUNCTION pidfence_claim(p_run_id text, p_attempt_id text, p_cancel_requested_at_ms bigint,
    p_owner text, p_digest text, p_lease_duration_ms bigint) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint;
  v_run runs%ROWTYPE;
  v_attempt_status text;
  v_existing cancellation_dispatches%ROWTYPE;
  v_written cancellation_dispatches%ROWTYPE;
  v_reason text;
BEGIN
  PERFORM pidfence_set_limits();
  v_now := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  SELECT * INTO v_run FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN json_build_object('kind', 'not_eligible', 'reason', 'run_missing');
  END IF;
  SELECT status INTO v_attempt_status FROM attempts WHERE run_id = p_run_id AND id = p_attempt_id FOR NO KEY UPDATE;
  SELECT * INTO v_existing FROM cancellation_dispatches WHERE run_id = p_run_id FOR NO KEY UPDATE;
  v_reason := CASE
    WHEN v_run.owner <> 'runtime' THEN 'run_not_runtime'
    WHEN v_run.status NOT IN ('queued', 'running') THEN 'run_terminal'
    WHEN v_run.cancel_requested_at_ms IS NULL THEN 'cancel_not_requested'
    WHEN v_run.cancel_requested_at_ms <> p_cancel_requested_at_ms THEN 'cancel_mismatch'
    WHEN v_attempt_status IS NULL THEN 'attempt_missing'
    WHEN v_attempt_status NOT IN ('claimed', 'starting', 'running') THEN 'attempt_inactive'
  END;
  IF v_reason IS NOT NULL THEN
    RETURN json_build_object('kind', 'not_eligible', 'reason', v_reason);
  END IF;
  IF v_existing.run_id IS NULL THEN
    -- Steps 3+6 at once: a first claim writes the leased row directly.
    INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version,
        dispatch_count, next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result,
        last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
      VALUES (p_run_id, v_run.project_id, p_attempt_id, 'leased', 1, 1, NULL, p_owner, p_digest,
        v_now + p_lease_duration_ms, NULL, v_now, NULL, v_now, v_now)
      RETURNING * INTO v_written;
    RETURN json_build_object('kind', 'claimed', 'record', pidfence_dispatch_json(v_written));
  END IF;
  v_reason := CASE
    WHEN v_existing.attempt_id <> p_attempt_id THEN 'attempt_conflict'
    WHEN v_existing.status IN ('dispatched', 'blocked') THEN v_existing.status
    WHEN v_existing.status = 'leased' AND COALESCE(v_existing.lease_expires_at_ms, 0) > v_now THEN 'leased'
    WHEN v_existing.status IN ('pending', 'retry_wait') AND COALESCE(v_existing.next_attempt_at_ms, 0) > v_now THEN 'not_due'
  END;
  IF v_reason IS NOT NULL THEN
    RETURN json_build_object('kind', v_reason);
  END IF;
  -- Step 6: version CAS; the due/expiry rule is repeated so a stale read can never lease.
  UPDATE cancellation_dispatches
    SET status = 'leased', version = version + 1, dispatch_count = dispatch_count + 1, next_attempt_at_ms = NULL,
        lease_owner = p_owner, lease_token_digest = p_digest, lease_expires_at_ms = v_now + p_lease_duration_ms,
        last_dispatched_at_ms = v_now, updated_at_ms = v_now
    WHERE run_id = p_run_id AND attempt_id = p_attempt_id AND version = v_existing.version
      AND ((status IN ('pending', 'retry_wait') AND next_attempt_at_ms <= v_now)
        OR (status = 'leased' AND lease_expires_at_ms <= v_now))
    RETURNING * INTO v_written;
  IF NOT FOUND THEN
    -- Impossible while we hold the row lock, unless something wrote the row outside pidfence.
    RAISE EXCEPTION 'lease CAS lost under the row lock' USING ERRCODE = 'P0001';
  END IF;
  RETURN json_build_object('kind', 'claimed', 'record', pidfence_dispatch_json(v_written));
END
$$;

-- design/dispatch §2.4: same lock order; the fenced settle, the run version CAS that reserves the event
-- sequence, and the event append. p_retry_delay_ms is NULL unless the result is retryable.
CREATE FUNCTION pidfence_record_result(p_run_id text, p_attempt_id text, p_owner text, p_digest text,
    p_expected_version bigint, p_status text, p_result text, p_retry_delay_ms bigint, p_blocked boolean,
    p_event_id text, p_event_type text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint;
  v_run_version bigint;
  v_settled cancellation_dispatches%ROWTYPE;
  v_seq bigint;
  v_payload text;
BEGIN
  PERFORM pidfence_set_limits();
  v_now := floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
  SELECT version INTO v_run_version FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN json_build_object('kind', 'stale_fence');
  END IF;
  PERFORM 1 FROM attempts WHERE run_id = p_run_id AND id = p_attempt_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN json_build_object('kind', 'stale_fence');
  END IF;
  UPDATE cancellation_dispatches
    SET status = p_status, version = version + 1, last_result = p_result,
        next_attempt_at_ms = CASE WHEN p_retry_delay_ms IS NULL THEN NULL ELSE v_now + p_retry_delay_ms END,
        blocked_at_ms = CASE WHEN p_blocked THEN v_now END,
        lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL, updated_at_ms = v_now
    WHERE run_id = p_run_id AND attempt_id = p_attempt_id AND status = 'leased'
      AND lease_owner = p_owner AND lease_token_digest = p_digest AND version = p_expected_version
    RETURNING * INTO v_settled;
  IF NOT FOUND THEN
    RETURN json_build_object('kind', 'stale_fence');
  END IF;
  UPDATE runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = v_now
    WHERE id = p_run_id AND version = v_run_version
    RETURNING next_event_seq - 1 INTO v_seq;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the run changed inside a write transaction' USING ERRCODE = 'P0001';
  END IF;
  -- The same text JSON.stringify writes (the payload reads back exactly as written).
  v_payload := format('{"attemptId":%s,"dispatchCount":%s,"result":%s}',
    to_json(v_settled.attempt_id)::text, v_settled.dispatch_count, to_json(p_result)::text);
  INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
    VALUES (p_run_id, v_seq, p_event_id, p_event_type, v_payload::json, v_now);
  RETURN json_build_object('kind', 'recorded', 'record', pidfence_dispatch_json(v_settled), 'seq', v_seq, 'nowMs', v_now);
END
$$;

-- Only the roles grantRuntime() names may call them (PostgreSQL grants EXECUTE to PUBLIC by default).
REVOKE EXECUTE ON FUNCTION pidfence_set_limits(), pidfence_dispatch_json(cancellation_dispatches),
  pidfence_claim(text, text, bigint, text, text, bigint),
  pidfence_record_result(text, text, text, text, bigint, text, text, bigint, boolean, text, text) FROM PUBLIC;
