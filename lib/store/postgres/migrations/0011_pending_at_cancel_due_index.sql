-- The pending dispatch is written when the cancellation meets an active attempt, and the due query
-- reads one index on the dispatch table: (status, due time, run id) for pending, retry_wait and
-- leased rows, the due time being the first-claim/retry time or the lease expiry
-- (docs/decisions/0022). Cancelled runs no longer have to be walked to find first claims and
-- expired leases.

CREATE INDEX cancellation_dispatches_due ON cancellation_dispatches
  (status, COALESCE(next_attempt_at_ms, lease_expires_at_ms), run_id)
  WHERE status IN ('pending', 'retry_wait', 'leased');

DROP INDEX cancellation_dispatches_retry_due;

-- Existing cancelled runs with an active attempt and no dispatch yet get theirs, due at the cancel time.
INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count,
    next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms,
    blocked_at_ms, created_at_ms, updated_at_ms)
  SELECT r.id, r.project_id, a.id, 'pending', 0, 0, r.cancel_requested_at_ms, NULL, NULL, NULL, NULL, NULL, NULL,
         r.cancel_requested_at_ms, r.cancel_requested_at_ms
  FROM runs AS r
  JOIN attempts AS a ON a.run_id = r.id AND a.status IN ('claimed', 'starting', 'running')
  WHERE r.owner = 'runtime' AND r.status IN ('queued', 'running') AND r.cancel_requested_at_ms IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM cancellation_dispatches AS d WHERE d.run_id = r.id);
