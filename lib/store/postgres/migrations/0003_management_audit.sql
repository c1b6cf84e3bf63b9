-- 0003: the management audit trail (design/architecture §5, design/dispatch §5; §6 gate 15): who rearmed which run, when,
-- against which expected fence. Written in the same transaction as the rearm and its RunEvent.

CREATE TABLE management_audit (
  id                text   NOT NULL,
  run_id            text   NOT NULL,
  project_id        text   NOT NULL,
  action            text   NOT NULL,
  actor             text   NOT NULL,
  expected_version  bigint NOT NULL,
  expected_result   text   NOT NULL,
  created_at_ms     bigint NOT NULL,
  CONSTRAINT management_audit_pkey PRIMARY KEY (id),
  CONSTRAINT management_audit_run_project_fkey FOREIGN KEY (run_id, project_id) REFERENCES runs (id, project_id),
  CONSTRAINT management_audit_action_check CHECK (action IN ('rearm')),
  CONSTRAINT management_audit_actor_check CHECK (length(actor) BETWEEN 1 AND 128),
  CONSTRAINT management_audit_expected_version_check CHECK (expected_version >= 0)
);

CREATE INDEX management_audit_by_run ON management_audit (run_id, created_at_ms);
