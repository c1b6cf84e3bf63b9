-- 0002: the durable cancellation dispatch record (design/dispatch §2.1, §2.4; design/postgres §D5; design/architecture §5).
-- One row per run, bound to one attempt of that run and to the run's project; CHECKs hold the
-- status/lease/retry/terminal shape (the same rules as lib/store/sqlite and checkStateShape()).

CREATE TABLE cancellation_dispatches (
  run_id                 text   NOT NULL,
  project_id             text   NOT NULL,
  attempt_id             text   NOT NULL,
  status                 text   NOT NULL,
  version                bigint NOT NULL,
  dispatch_count         bigint NOT NULL,
  next_attempt_at_ms     bigint,
  lease_owner            text,
  -- Only the domain-separated SHA-256 of the lease token; the raw token is never stored (design/postgres §D4).
  lease_token_digest     text,
  lease_expires_at_ms    bigint,
  last_result            text,
  last_dispatched_at_ms  bigint,
  blocked_at_ms          bigint,
  created_at_ms          bigint NOT NULL,
  updated_at_ms          bigint NOT NULL,
  CONSTRAINT cancellation_dispatches_pkey PRIMARY KEY (run_id),
  CONSTRAINT cancellation_dispatches_run_project_fkey FOREIGN KEY (run_id, project_id) REFERENCES runs (id, project_id),
  CONSTRAINT cancellation_dispatches_attempt_run_fkey FOREIGN KEY (attempt_id, run_id) REFERENCES attempts (id, run_id),
  CONSTRAINT cancellation_dispatches_status_check CHECK (status IN ('pending', 'leased', 'retry_wait', 'dispatched', 'blocked')),
  CONSTRAINT cancellation_dispatches_version_check CHECK (version >= 0),
  CONSTRAINT cancellation_dispatches_dispatch_count_check CHECK (dispatch_count >= 0 AND dispatch_count <= version),
  CONSTRAINT cancellation_dispatches_next_attempt_at_ms_check CHECK (next_attempt_at_ms >= 0),
  CONSTRAINT cancellation_dispatches_lease_owner_check CHECK (length(lease_owner) BETWEEN 1 AND 128),
  CONSTRAINT cancellation_dispatches_lease_token_digest_check CHECK (lease_token_digest ~ '^[0-9a-f]{64}$'),
  CONSTRAINT cancellation_dispatches_lease_expires_at_ms_check CHECK (lease_expires_at_ms >= 0),
  CONSTRAINT cancellation_dispatches_last_result_check CHECK (last_result IN ('termination_requested', 'already_exited', 'identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid', 'controller_missing', 'handle_missing', 'dispatch_error')),
  CONSTRAINT cancellation_dispatches_last_dispatched_at_ms_check CHECK (last_dispatched_at_ms >= 0),
  CONSTRAINT cancellation_dispatches_blocked_at_ms_check CHECK (blocked_at_ms >= 0),
  CONSTRAINT cancellation_dispatches_pending_shape CHECK (status <> 'pending' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NOT NULL AND blocked_at_ms IS NULL)),
  CONSTRAINT cancellation_dispatches_leased_shape CHECK (status <> 'leased' OR (
    lease_owner IS NOT NULL AND lease_token_digest IS NOT NULL AND lease_expires_at_ms IS NOT NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NULL AND dispatch_count >= 1)),
  CONSTRAINT cancellation_dispatches_retry_wait_shape CHECK (status <> 'retry_wait' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NOT NULL AND blocked_at_ms IS NULL AND last_result IS NOT NULL)),
  CONSTRAINT cancellation_dispatches_dispatched_shape CHECK (status <> 'dispatched' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NULL
    AND last_result IN ('termination_requested', 'already_exited'))),
  CONSTRAINT cancellation_dispatches_blocked_shape CHECK (status <> 'blocked' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NOT NULL
    AND last_result IN ('identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid')))
);

-- Deferred dispatches by due time: the retry branch of the due query. Leased rows stay out of every
-- partial index; expired leases are found through runs_cancel_open (docs/decisions/0011, 0020).
CREATE INDEX cancellation_dispatches_retry_due ON cancellation_dispatches (next_attempt_at_ms, run_id)
  WHERE status IN ('pending', 'retry_wait');

-- The per-project blocked drill-down, keyset (blocked_at_ms, run_id) (design/dispatch §5, §6 gate 18).
CREATE INDEX cancellation_dispatches_blocked ON cancellation_dispatches (project_id, blocked_at_ms, run_id)
  WHERE status = 'blocked';
