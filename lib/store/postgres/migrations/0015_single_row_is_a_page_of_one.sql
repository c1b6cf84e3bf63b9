-- 0015: one plpgsql home for the claim and the settle (docs/decisions/0231). The single-row
-- functions of 0007 restated every rule that the page functions of 0012 also spell; from here on
-- pidfence_claim is pidfence_claim_page with one item and pidfence_record_result is
-- pidfence_record_results with one command, so a rule is changed in one place. Same names,
-- arguments and JSON outcome, so callers and the runtime role's EXECUTE grants are unchanged
-- (CREATE OR REPLACE keeps a function's privileges). The lock order, the limits and the database
-- clock are the page functions' own (design/postgres §D3, §D7-D8).

CREATE OR REPLACE FUNCTION pidfence_claim(p_run_id text, p_attempt_id text, p_cancel_requested_at_ms bigint,
    p_owner text, p_digest text, p_lease_duration_ms bigint) RETURNS json LANGUAGE sql AS $$
  SELECT outcome FROM pidfence_claim_page(ARRAY[p_run_id], ARRAY[p_attempt_id], ARRAY[p_cancel_requested_at_ms],
    p_owner, ARRAY[p_digest], p_lease_duration_ms)
$$;

CREATE OR REPLACE FUNCTION pidfence_record_result(p_run_id text, p_attempt_id text, p_owner text, p_digest text,
    p_expected_version bigint, p_status text, p_result text, p_retry_delay_ms bigint, p_blocked boolean,
    p_event_id text, p_event_type text) RETURNS json LANGUAGE sql AS $$
  SELECT outcome FROM pidfence_record_results(ARRAY[p_run_id], ARRAY[p_attempt_id], ARRAY[p_owner], ARRAY[p_digest],
    ARRAY[p_expected_version], ARRAY[p_status], ARRAY[p_result], ARRAY[p_retry_delay_ms], ARRAY[p_blocked],
    ARRAY[p_event_id], ARRAY[p_event_type])
$$;
