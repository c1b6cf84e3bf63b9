-- 0009: the rules the claim + settle cycle evaluates on every write, spelt without IN lists
-- (docs/decisions/0013). SQLite evaluates `x IN (three or more constants)` in a CHECK or a partial-index
-- WHERE by building a temporary index of the list on every run of the statement; `x = 'a' OR x = 'b' ...`
-- is a few comparisons. Every rule is kept exactly (for a NOT NULL column and for NULL alike, `x IN (a, b)`
-- and `x = a OR x = b` are the same three-valued expression); only the spelling changes.
-- SQLite changes a CHECK or an index predicate only by a rebuild: new table, copy, drop, rename, indexes.
-- Nothing references cancellation_dispatches or run_events, so the drops check no foreign key; the copies
-- check theirs row by row, as foreign keys stay on.

CREATE TABLE cancellation_dispatches_0009 (
  run_id                 TEXT    NOT NULL PRIMARY KEY,
  project_id             TEXT    NOT NULL,
  attempt_id             TEXT    NOT NULL,
  status                 TEXT    NOT NULL CHECK (status = 'pending' OR status = 'leased' OR status = 'retry_wait'
                                                 OR status = 'dispatched' OR status = 'blocked'),
  version                INTEGER NOT NULL CHECK (version >= 0),
  dispatch_count         INTEGER NOT NULL CHECK (dispatch_count >= 0 AND dispatch_count <= version),
  next_attempt_at_ms     INTEGER CHECK (next_attempt_at_ms >= 0),
  lease_owner            TEXT    CHECK (length(lease_owner) BETWEEN 1 AND 128),
  -- Only the domain-separated SHA-256 of the lease token; the raw token is never stored.
  lease_token_digest     TEXT    CHECK (length(lease_token_digest) = 64 AND lease_token_digest NOT GLOB '*[^0-9a-f]*'),
  lease_expires_at_ms    INTEGER CHECK (lease_expires_at_ms >= 0),
  last_result            TEXT    CHECK (last_result = 'termination_requested' OR last_result = 'already_exited'
                                        OR last_result = 'identity_mismatch' OR last_result = 'pid_mismatch'
                                        OR last_result = 'unsupported' OR last_result = 'invalid'
                                        OR last_result = 'controller_missing' OR last_result = 'handle_missing'
                                        OR last_result = 'dispatch_error'),
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
    AND (last_result = 'termination_requested' OR last_result = 'already_exited'))),
  CHECK (status <> 'blocked' OR (
    lease_owner IS NULL AND lease_token_digest IS NULL AND lease_expires_at_ms IS NULL
    AND next_attempt_at_ms IS NULL AND blocked_at_ms IS NOT NULL
    AND (last_result = 'identity_mismatch' OR last_result = 'pid_mismatch' OR last_result = 'unsupported'
         OR last_result = 'invalid')))
) STRICT, WITHOUT ROWID;

INSERT INTO cancellation_dispatches_0009 (run_id, project_id, attempt_id, status, version, dispatch_count,
    next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms,
    blocked_at_ms, created_at_ms, updated_at_ms)
  SELECT run_id, project_id, attempt_id, status, version, dispatch_count,
    next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms,
    blocked_at_ms, created_at_ms, updated_at_ms
  FROM cancellation_dispatches;

DROP TABLE cancellation_dispatches;

ALTER TABLE cancellation_dispatches_0009 RENAME TO cancellation_dispatches;

-- The indexes went with the old table: the due index of 0008 (its predicate spelt with OR; the due
-- query repeats it verbatim) and the blocked drill-down of 0002, unchanged.
CREATE INDEX cancellation_dispatches_due ON cancellation_dispatches
  (status, COALESCE(next_attempt_at_ms, lease_expires_at_ms), run_id)
  WHERE status = 'pending' OR status = 'retry_wait' OR status = 'leased';

CREATE INDEX cancellation_dispatches_blocked ON cancellation_dispatches (project_id, blocked_at_ms, run_id)
  WHERE status = 'blocked';

CREATE TABLE run_events_0009 (
  run_id         TEXT    NOT NULL REFERENCES runs (id),
  seq            INTEGER NOT NULL CHECK (seq >= 1),
  id             TEXT    NOT NULL,
  type           TEXT    NOT NULL CHECK (type = 'run.cancel_requested' OR type = 'run.cancel_dispatched'
                                         OR type = 'run.cancel_dispatch_blocked' OR type = 'run.cancel_dispatch_failed'
                                         OR type = 'run.cancel_dispatch_rearmed' OR type = 'run.terminal'),
  payload        TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 1024),
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

INSERT INTO run_events_0009 (run_id, seq, id, type, payload, created_at_ms)
  SELECT run_id, seq, id, type, payload, created_at_ms FROM run_events;

DROP TABLE run_events;

ALTER TABLE run_events_0009 RENAME TO run_events;
