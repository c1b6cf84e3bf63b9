-- 0006: every attempt has one owner (docs/decisions/0070), the same logical schema as SQLite 0006:
-- the runners of a store with their host and liveness identity, the owning runner of each attempt,
-- and `attempt.adopted` events.

CREATE TABLE runners (
  id             text   NOT NULL,
  host_id        text   NOT NULL,
  kind           text   NOT NULL,
  identity       json   NOT NULL,
  started_at_ms  bigint NOT NULL,
  ended_at_ms    bigint,
  CONSTRAINT runners_pkey PRIMARY KEY (id),
  CONSTRAINT runners_host_id_check CHECK (length(host_id) BETWEEN 1 AND 64),
  CONSTRAINT runners_kind_check CHECK (kind IN ('run', 'supervise', 'cancel')),
  CONSTRAINT runners_identity_check CHECK (length(identity::text) <= 256)
);

ALTER TABLE attempts ADD COLUMN runner_id text CONSTRAINT attempts_runner_fkey REFERENCES runners (id);

CREATE INDEX attempts_runner_active ON attempts (runner_id, run_id)
  WHERE status IN ('claimed', 'starting', 'running');

ALTER TABLE attempt_events DROP CONSTRAINT attempt_events_type_check;

ALTER TABLE attempt_events ADD CONSTRAINT attempt_events_type_check CHECK (type IN ('attempt.terminal', 'attempt.adopted'));
