-- 0006: every attempt has one owner (docs/decisions/0070): the runners of a store (a foreground
-- `run`, a `supervise`, a `cancel` that stops an orphan) with their host and the identity that
-- proves them alive, the owning runner of each attempt, and `attempt.adopted` events.

CREATE TABLE runners (
  id             TEXT    NOT NULL PRIMARY KEY,
  host_id        TEXT    NOT NULL CHECK (length(host_id) BETWEEN 1 AND 64),
  kind           TEXT    NOT NULL CHECK (kind IN ('run', 'supervise', 'cancel')),
  -- The runner process's identity ({pid, bootId, startTicks, pidfsIno}): its liveness proof.
  identity       TEXT    NOT NULL CHECK (json_valid(identity) AND length(identity) <= 256),
  started_at_ms  INTEGER NOT NULL,
  -- Set when the runner ended cleanly: its attempts are adoptable at once.
  ended_at_ms    INTEGER
) STRICT, WITHOUT ROWID;

-- NULL for attempts written before 0006 (one runner per store then).
ALTER TABLE attempts ADD COLUMN runner_id TEXT REFERENCES runners (id);

-- A runner's own active attempts (its control page, deadlines, drain) and the adoption scan.
CREATE INDEX attempts_runner_active ON attempts (runner_id, run_id)
  WHERE status IN ('claimed', 'starting', 'running');

-- attempt_events gains the `attempt.adopted` type: SQLite changes a CHECK only by a rebuild.
CREATE TABLE attempt_events_0006 (
  run_id         TEXT    NOT NULL,
  attempt_id     TEXT    NOT NULL,
  seq            INTEGER NOT NULL CHECK (seq >= 1),
  id             TEXT    NOT NULL,
  type           TEXT    NOT NULL CHECK (type IN ('attempt.terminal', 'attempt.adopted')),
  payload        TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 1024),
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (attempt_id, seq),
  FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id)
) STRICT, WITHOUT ROWID;

INSERT INTO attempt_events_0006 (run_id, attempt_id, seq, id, type, payload, created_at_ms)
  SELECT run_id, attempt_id, seq, id, type, payload, created_at_ms FROM attempt_events;

DROP TABLE attempt_events;

ALTER TABLE attempt_events_0006 RENAME TO attempt_events;
