-- 0001: runs, attempts and the append-only run events (design/architecture §5; design/dispatch §2.2, §2.4; design/execution §2-3).
-- WITHOUT ROWID: rows live in their primary-key b-tree, so a write touches one page, not a table
-- page plus a key index (fewer WAL frames per claim/settle cycle, docs/decisions/0011).

CREATE TABLE runs (
  id                      TEXT    NOT NULL PRIMARY KEY,
  project_id              TEXT    NOT NULL,
  owner                   TEXT    NOT NULL CHECK (owner IN ('runtime', 'external')),
  status                  TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out')),
  version                 INTEGER NOT NULL CHECK (version >= 0),
  cancel_requested_at_ms  INTEGER CHECK (cancel_requested_at_ms >= 0),
  cancel_reason           TEXT    CHECK (cancel_reason IN ('user', 'policy', 'timeout', 'shutdown')),
  next_event_seq          INTEGER NOT NULL CHECK (next_event_seq >= 1),
  created_at_ms           INTEGER NOT NULL,
  updated_at_ms           INTEGER NOT NULL,
  CHECK ((cancel_requested_at_ms IS NULL) = (cancel_reason IS NULL)),
  -- The parent key of the dispatch's composite (run_id, project_id) reference.
  UNIQUE (id, project_id)
) STRICT, WITHOUT ROWID;

-- Cancelled, still active runs: the first-claim and expired-lease branches of the due query.
CREATE INDEX runs_cancel_open ON runs (cancel_requested_at_ms, id)
  WHERE cancel_requested_at_ms IS NOT NULL AND status IN ('queued', 'running');

CREATE TABLE attempts (
  run_id                TEXT    NOT NULL REFERENCES runs (id),
  id                    TEXT    NOT NULL UNIQUE,
  status                TEXT    NOT NULL CHECK (status IN ('claimed', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out')),
  pid                   INTEGER CHECK (pid BETWEEN 1 AND 4194304),
  handle                TEXT    CHECK (length(handle) BETWEEN 1 AND 1024),
  deadline_at_ms        INTEGER CHECK (deadline_at_ms >= 0),
  receipt_token_digest  TEXT    CHECK (length(receipt_token_digest) = 64),
  created_at_ms         INTEGER NOT NULL,
  updated_at_ms         INTEGER NOT NULL,
  PRIMARY KEY (run_id, id),
  CHECK ((pid IS NULL) = (handle IS NULL))
) STRICT, WITHOUT ROWID;

-- design/dispatch §2.2 claims "the unique active attempt": the database makes it unique.
CREATE UNIQUE INDEX attempts_one_active ON attempts (run_id)
  WHERE status IN ('claimed', 'starting', 'running');

-- design/execution §3: active attempts by deadline, a stable (deadline, run, attempt) keyset.
CREATE INDEX attempts_deadline_due ON attempts (deadline_at_ms, run_id, id)
  WHERE deadline_at_ms IS NOT NULL AND status IN ('claimed', 'starting', 'running');

CREATE TABLE run_events (
  run_id         TEXT    NOT NULL REFERENCES runs (id),
  seq            INTEGER NOT NULL CHECK (seq >= 1),
  id             TEXT    NOT NULL,
  type           TEXT    NOT NULL CHECK (type IN ('run.cancel_requested', 'run.cancel_dispatched', 'run.cancel_dispatch_blocked', 'run.cancel_dispatch_failed', 'run.terminal')),
  payload        TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 1024),
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
