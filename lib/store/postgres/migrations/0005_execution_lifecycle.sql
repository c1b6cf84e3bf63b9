-- 0005: the local execution lifecycle (design/execution §2-3), the same logical schema as SQLite 0005:
-- attempt events written with the terminal CAS, the receipt journal (cleanup after commit,
-- quarantine intent before a move; rows are closed, never deleted) and the receipt-digest lookup.

CREATE TABLE attempt_events (
  run_id         text   NOT NULL,
  attempt_id     text   NOT NULL,
  seq            bigint NOT NULL,
  id             text   NOT NULL,
  type           text   NOT NULL,
  payload        json   NOT NULL,
  created_at_ms  bigint NOT NULL,
  CONSTRAINT attempt_events_pkey PRIMARY KEY (attempt_id, seq),
  CONSTRAINT attempt_events_attempt_fkey FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id),
  CONSTRAINT attempt_events_seq_check CHECK (seq >= 1),
  CONSTRAINT attempt_events_type_check CHECK (type IN ('attempt.terminal')),
  CONSTRAINT attempt_events_payload_check CHECK (length(payload::text) <= 1024)
);

CREATE TABLE receipt_journal (
  attempt_id     text   NOT NULL,
  action         text   NOT NULL,
  run_id         text   NOT NULL,
  reason         text,
  created_at_ms  bigint NOT NULL,
  done_at_ms     bigint,
  CONSTRAINT receipt_journal_pkey PRIMARY KEY (attempt_id, action),
  CONSTRAINT receipt_journal_attempt_fkey FOREIGN KEY (run_id, attempt_id) REFERENCES attempts (run_id, id),
  CONSTRAINT receipt_journal_action_check CHECK (action IN ('delete', 'quarantine')),
  CONSTRAINT receipt_journal_reason_check CHECK (reason IN ('malformed', 'identity', 'token', 'sequence', 'time')),
  CONSTRAINT receipt_journal_reason_shape CHECK ((action = 'quarantine') = (reason IS NOT NULL))
);

CREATE INDEX receipt_journal_open ON receipt_journal (created_at_ms, attempt_id, action) WHERE done_at_ms IS NULL;

CREATE UNIQUE INDEX attempts_receipt_digest ON attempts (receipt_token_digest)
  WHERE receipt_token_digest IS NOT NULL;
