-- 0013 (cluster; PostgreSQL only): the operator's hold on the fleet (docs/decisions/0240, 0241,
-- 0244). One row per worker name (the subject CN of its certificate): what it reported of itself,
-- whether new work may reach it (cordon, drain) and whether it is revoked (the deny list the control
-- plane reads on every request). Every operator's act is an append-only audit row. Worker permissions
-- are granted in management_grants on the scope `@cluster`, which no project id can spell.

CREATE TABLE cluster_workers (
  name              text   NOT NULL,
  -- active: pulls work; cordoned: no new work; draining: no new work and its runs are asked to stop.
  admission         text   NOT NULL,
  -- Set by `pidfence worker revoke`, cleared by `reinstate`: every request of this name is refused.
  revoked_at_ms     bigint,
  -- What the worker announced of itself (POST /v1/workers/self); NULL until it did.
  software_version  text,
  capacity          integer,
  -- Grows on every change of admission or revocation, so two operators never overwrite each other unseen.
  revision          bigint NOT NULL,
  created_at_ms     bigint NOT NULL,
  updated_at_ms     bigint NOT NULL,
  CONSTRAINT cluster_workers_pkey PRIMARY KEY (name),
  CONSTRAINT cluster_workers_name_check CHECK (length(name) BETWEEN 1 AND 128),
  CONSTRAINT cluster_workers_admission_check CHECK (admission IN ('active', 'cordoned', 'draining')),
  CONSTRAINT cluster_workers_software_version_check CHECK (length(software_version) BETWEEN 1 AND 64),
  CONSTRAINT cluster_workers_capacity_check CHECK (capacity BETWEEN 1 AND 1024),
  CONSTRAINT cluster_workers_revision_check CHECK (revision >= 0),
  CONSTRAINT cluster_workers_times_check CHECK (created_at_ms >= 0 AND updated_at_ms >= created_at_ms
    AND (revoked_at_ms IS NULL OR revoked_at_ms >= 0))
);

CREATE TABLE worker_audit (
  id               text   NOT NULL,
  worker_name      text   NOT NULL,
  action           text   NOT NULL,
  actor            text   NOT NULL,
  -- changed: the act moved the worker's state; unchanged: it was already so (idempotent, still recorded).
  outcome          text   NOT NULL,
  revision         bigint NOT NULL,
  created_at_ms    bigint NOT NULL,
  CONSTRAINT worker_audit_pkey PRIMARY KEY (id),
  CONSTRAINT worker_audit_worker_fkey FOREIGN KEY (worker_name) REFERENCES cluster_workers (name),
  CONSTRAINT worker_audit_action_check CHECK (action IN ('cordon', 'drain', 'uncordon', 'revoke', 'reinstate')),
  CONSTRAINT worker_audit_actor_check CHECK (length(actor) BETWEEN 1 AND 128),
  CONSTRAINT worker_audit_outcome_check CHECK (outcome IN ('changed', 'unchanged')),
  CONSTRAINT worker_audit_created_at_ms_check CHECK (created_at_ms >= 0)
);

CREATE INDEX worker_audit_by_worker ON worker_audit (worker_name, created_at_ms);

-- Sessions by the name that registered them: the worker list and a revocation read them by name.
CREATE INDEX worker_sessions_by_principal ON worker_sessions (principal, last_seen_at_ms);

ALTER TABLE management_grants DROP CONSTRAINT management_grants_permission_check;
ALTER TABLE management_grants ADD CONSTRAINT management_grants_permission_check
  CHECK (permission IN ('run.read', 'run.stop', 'grants.write', 'worker.read', 'worker.manage'));
-- Worker permissions live on the `@cluster` scope and only there; `@cluster` holds nothing else but grants.write.
ALTER TABLE management_grants ADD CONSTRAINT management_grants_scope_check
  CHECK ((permission IN ('worker.read', 'worker.manage')) = (project_id = '@cluster') OR (permission = 'grants.write' AND project_id = '@cluster'));
