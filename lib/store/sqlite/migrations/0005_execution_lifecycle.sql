-- 0005: the local execution lifecycle (design/execution §2-3): attempt events written with the terminal
-- CAS, the receipt journal (cleanup after commit, quarantine intent before a move), and the
-- receipt-token digest lookup. New tables only: run_events keeps its 0001 shape.

CREATE TABLE attempt_events (
  run_id         TEXT    NOT NULL,
  attempt_id     TEXT    NOT NULL,
  seq            INTEGER NOT NULL CHECK (seq >= 1),
  id             TEXT    NOT NULL,
  type           TEXT    NOT NULL CHECK (type IN ('attempt.terminal')),
  payload        TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 1024),
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (attempt_id, seq),
  FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id)
) STRICT, WITHOUT ROWID;

-- design/execution §2: a receipt is deleted only after its terminal commit (action 'delete', written in
-- that transaction), and an invalid one is moved only after its intent is saved ('quarantine').
CREATE TABLE receipt_journal (
  attempt_id     TEXT    NOT NULL,
  action         TEXT    NOT NULL CHECK (action IN ('delete', 'quarantine')),
  run_id         TEXT    NOT NULL,
  reason         TEXT    CHECK (reason IN ('malformed', 'identity', 'token', 'sequence', 'time')),
  created_at_ms  INTEGER NOT NULL,
  -- Set once the file action happened; rows are never deleted (the runtime role has no DELETE).
  done_at_ms     INTEGER,
  PRIMARY KEY (attempt_id, action),
  FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id),
  CHECK ((action = 'quarantine') = (reason IS NOT NULL))
) STRICT, WITHOUT ROWID;

-- The low-frequency cleanup page: oldest open journal rows first.
CREATE INDEX receipt_journal_open ON receipt_journal (created_at_ms, attempt_id, action) WHERE done_at_ms IS NULL;

-- The receipt-token digest lookup: one attempt per digest.
CREATE UNIQUE INDEX attempts_receipt_digest ON attempts (receipt_token_digest)
  WHERE receipt_token_digest IS NOT NULL;
