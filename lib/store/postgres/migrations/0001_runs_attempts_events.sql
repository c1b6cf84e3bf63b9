-- 0001: runs, attempts and the append-only run events (design/architecture §5; design/dispatch §2.2, §2.4; design/execution §2-3).
-- The same logical schema as lib/store/sqlite/migrations/0001; times are epoch ms as bigint, written
-- only from transaction_timestamp() (design/postgres §D3).

CREATE TABLE runs (
  id                      text   NOT NULL,
  project_id              text   NOT NULL,
  owner                   text   NOT NULL,
  status                  text   NOT NULL,
  version                 bigint NOT NULL,
  cancel_requested_at_ms  bigint,
  cancel_reason           text,
  next_event_seq          bigint NOT NULL,
  created_at_ms           bigint NOT NULL,
  updated_at_ms           bigint NOT NULL,
  CONSTRAINT runs_pkey PRIMARY KEY (id),
  -- The parent key of the dispatch's and the audit's composite (run_id, project_id) reference.
  CONSTRAINT runs_id_project_key UNIQUE (id, project_id),
  CONSTRAINT runs_id_check CHECK (length(id) BETWEEN 1 AND 128),
  CONSTRAINT runs_project_id_check CHECK (length(project_id) BETWEEN 1 AND 128),
  CONSTRAINT runs_owner_check CHECK (owner IN ('runtime', 'external')),
  CONSTRAINT runs_status_check CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out')),
  CONSTRAINT runs_version_check CHECK (version >= 0),
  CONSTRAINT runs_cancel_requested_at_ms_check CHECK (cancel_requested_at_ms >= 0),
  CONSTRAINT runs_cancel_reason_check CHECK (cancel_reason IN ('user', 'policy', 'timeout', 'shutdown')),
  CONSTRAINT runs_next_event_seq_check CHECK (next_event_seq >= 1),
  CONSTRAINT runs_cancel_intent_shape CHECK ((cancel_requested_at_ms IS NULL) = (cancel_reason IS NULL))
);

-- Cancelled, still active runs: the first-claim and expired-lease branches of the due query.
CREATE INDEX runs_cancel_open ON runs (cancel_requested_at_ms, id)
  WHERE cancel_requested_at_ms IS NOT NULL AND status IN ('queued', 'running');

CREATE TABLE attempts (
  run_id                text   NOT NULL,
  id                    text   NOT NULL,
  status                text   NOT NULL,
  pid                   integer,
  handle                text,
  deadline_at_ms        bigint,
  receipt_token_digest  text,
  created_at_ms         bigint NOT NULL,
  updated_at_ms         bigint NOT NULL,
  CONSTRAINT attempts_pkey PRIMARY KEY (run_id, id),
  CONSTRAINT attempts_id_key UNIQUE (id),
  CONSTRAINT attempts_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id),
  CONSTRAINT attempts_status_check CHECK (status IN ('claimed', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out')),
  CONSTRAINT attempts_pid_check CHECK (pid BETWEEN 1 AND 4194304),
  CONSTRAINT attempts_handle_check CHECK (length(handle) BETWEEN 1 AND 1024),
  CONSTRAINT attempts_deadline_at_ms_check CHECK (deadline_at_ms >= 0),
  CONSTRAINT attempts_receipt_token_digest_check CHECK (receipt_token_digest ~ '^[0-9a-f]{64}$'),
  CONSTRAINT attempts_process_shape CHECK ((pid IS NULL) = (handle IS NULL))
);

-- design/dispatch §2.2 claims "the unique active attempt": the database makes it unique.
CREATE UNIQUE INDEX attempts_one_active ON attempts (run_id)
  WHERE status IN ('claimed', 'starting', 'running');

-- design/execution §3: active attempts by deadline, a stable (deadline, run, attempt) keyset.
CREATE INDEX attempts_deadline_due ON attempts (deadline_at_ms, run_id, id)
  WHERE deadline_at_ms IS NOT NULL AND status IN ('claimed', 'starting', 'running');

CREATE TABLE run_events (
  run_id         text   NOT NULL,
  seq            bigint NOT NULL,
  id             text   NOT NULL,
  type           text   NOT NULL,
  -- json, not jsonb: the payload reads back exactly as written (key order included).
  payload        json   NOT NULL,
  created_at_ms  bigint NOT NULL,
  CONSTRAINT run_events_pkey PRIMARY KEY (run_id, seq),
  CONSTRAINT run_events_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id),
  CONSTRAINT run_events_seq_check CHECK (seq >= 1),
  CONSTRAINT run_events_type_check CHECK (type IN ('run.cancel_requested', 'run.cancel_dispatched', 'run.cancel_dispatch_blocked', 'run.cancel_dispatch_failed', 'run.terminal')),
  CONSTRAINT run_events_payload_check CHECK (octet_length(payload::text) <= 1024)
);
