-- 0002: the durable cancellation dispatch record (design/dispatch §2.1, §2.4; design/postgres §D5; design/architecture §5).
-- One row per run, bound to one attempt; CHECKs hold the status/lease/retry/terminal shape.

CREATE TABLE cancellation_dispatches (
  run_id                 TEXT    NOT NULL PRIMARY KEY,
  project_id             TEXT    NOT NULL,
  attempt_id             TEXT    NOT NULL,
  status                 TEXT    NOT NULL CHECK (status IN ('pending', 'leased', 'retry_wait', 'dispatched', 'blocked')),
  version                INTEGER NOT NULL CHECK (version >= 0),
  dispatch_count         INTEGER NOT NULL CHECK (dispatch_count >= 0 AND dispatch_count <= version),
  next_attempt_at_ms     INTEGER CHECK (next_attempt_at_ms >= 0),
  lease_owner            TEXT    CHECK (length(lease_owner) BETWEEN 1 AND 128),
  -- Only the domain-separated SHA-256 of the lease token; the raw token is never stored.
  lease_token_digest     TEXT    CHECK (length(lease_token_digest) = 64 AND lease_token_digest NOT GLOB '*[^0-9a-f]*'),
  lease_expires_at_ms    INTEGER CHECK (lease_expires_at_ms >= 0),
  last_result            TEXT    CHECK (last_result IN ('termination_requested', 'already_exited', 'identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid', 'controller_missing', 'handle_missing', 'dispatch_error')),
  last_dispatched_at_ms  INTEGER CHECK (last_dispatched_at_ms >= 0),
  blocked_at_ms          INTEGER CHECK (blocked_at_ms >= 0),
  created_at_ms          INTEGER NOT NULL,
  updated_at_ms          INTEGER NOT NULL,
  FOREIGN KEY (run_id, project_id) REFERENCES runs (id, project_id),
  FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id),
  CHECK (status <> 'pending' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NOT NULL AND blocked_at_ms IS NULL)),
  CHECK (status <> 'leased' OR (
    lease_owner IS NOT NULL AND lease_token_digest IS NOT NULL AND lease_expires_at_ms IS NOT NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NULL AND dispatch_count >= 1)),
  CHECK (status <> 'retry_wait' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NOT NULL AND blocked_at_ms IS NULL AND last_result IS NOT NULL)),
  CHECK (status <> 'dispatched' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NULL
    AND last_result IN ('termination_requested', 'already_exited'))),
  CHECK (status <> 'blocked' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NOT NULL
    AND last_result IN ('identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid')))
) STRICT, WITHOUT ROWID;

-- Deferred dispatches by due time: the retry branch of the due query. Leased rows stay out of
-- every index, so the common claim → dispatched cycle never writes an index page; expired leases
-- are found through runs_cancel_open instead (docs/decisions/0011).
CREATE INDEX cancellation_dispatches_retry_due ON cancellation_dispatches (next_attempt_at_ms, run_id)
  WHERE status IN ('pending', 'retry_wait');

-- The per-project blocked drill-down, keyset (blocked_at_ms, run_id) (design/dispatch §5, §6 gate 18).
CREATE INDEX cancellation_dispatches_blocked ON cancellation_dispatches (project_id, blocked_at_ms, run_id)
  WHERE status = 'blocked';
