-- 0009 (cluster; PostgreSQL only): remote worker sessions, the jobs a control plane hands out, and
-- the run-dispatch lease that binds one run's attempt to one worker session under a fence that only
-- grows (docs/decisions/0100). Times are epoch ms from transaction_timestamp() (design/postgres §D3). The
-- control plane stores no PID or handle: attempts pulled by workers keep pid/handle NULL.

CREATE TABLE worker_sessions (
  id               text   NOT NULL,
  -- The certificate subject the session was registered under; every later call must present it.
  principal        text   NOT NULL,
  started_at_ms    bigint NOT NULL,
  last_seen_at_ms  bigint NOT NULL,
  ended_at_ms      bigint,
  CONSTRAINT worker_sessions_pkey PRIMARY KEY (id),
  CONSTRAINT worker_sessions_id_check CHECK (length(id) BETWEEN 1 AND 128),
  CONSTRAINT worker_sessions_principal_check CHECK (length(principal) BETWEEN 1 AND 256),
  CONSTRAINT worker_sessions_times_check CHECK (started_at_ms >= 0 AND last_seen_at_ms >= started_at_ms
    AND (ended_at_ms IS NULL OR ended_at_ms >= started_at_ms))
);

CREATE TABLE cluster_jobs (
  run_id         text   NOT NULL,
  -- The job's argv (a JSON array of strings); read only by the worker that pulls it, never logged.
  argv           json   NOT NULL,
  timeout_ms     bigint,
  created_at_ms  bigint NOT NULL,
  CONSTRAINT cluster_jobs_pkey PRIMARY KEY (run_id),
  CONSTRAINT cluster_jobs_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id),
  CONSTRAINT cluster_jobs_argv_check CHECK (json_typeof(argv) = 'array' AND octet_length(argv::text) <= 8192),
  CONSTRAINT cluster_jobs_timeout_ms_check CHECK (timeout_ms BETWEEN 1 AND 86400000)
);

CREATE INDEX cluster_jobs_waiting ON cluster_jobs (created_at_ms, run_id);

CREATE TABLE run_dispatch_leases (
  run_id          text   NOT NULL,
  attempt_id      text   NOT NULL,
  session_id      text   NOT NULL,
  -- The database clock at the grant, and above every earlier grant on this run: it only grows, and a
  -- holder of an older fence is told `lost`.
  fence           bigint NOT NULL,
  expires_at_ms   bigint NOT NULL,
  released_at_ms  bigint,
  created_at_ms   bigint NOT NULL,
  updated_at_ms   bigint NOT NULL,
  CONSTRAINT run_dispatch_leases_pkey PRIMARY KEY (run_id),
  CONSTRAINT run_dispatch_leases_attempt_run_fkey FOREIGN KEY (attempt_id, run_id) REFERENCES attempts (id, run_id),
  CONSTRAINT run_dispatch_leases_session_fkey FOREIGN KEY (session_id) REFERENCES worker_sessions (id),
  CONSTRAINT run_dispatch_leases_fence_check CHECK (fence >= 1),
  CONSTRAINT run_dispatch_leases_expires_at_ms_check CHECK (expires_at_ms >= 0),
  CONSTRAINT run_dispatch_leases_released_at_ms_check CHECK (released_at_ms >= 0)
);

-- Unreleased leases by expiry: the bounded reap of dead workers' leases on the pull path.
CREATE INDEX run_dispatch_leases_open ON run_dispatch_leases (expires_at_ms, run_id)
  WHERE released_at_ms IS NULL;
