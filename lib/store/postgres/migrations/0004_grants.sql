-- 0004: management grants (design/dispatch §5.1; §5; docs/decisions/0040): which subject holds which
-- permission on which project. The runtime role may only SELECT it (lib/store/postgres/roles.ts);
-- the migration owner writes it. Also admits the `run.cancel_dispatch_rearmed` RunEvent (gate 15).

CREATE TABLE management_grants (
  subject        text   NOT NULL,
  project_id     text   NOT NULL,
  permission     text   NOT NULL,
  granted_by     text   NOT NULL,
  created_at_ms  bigint NOT NULL,
  CONSTRAINT management_grants_pkey PRIMARY KEY (subject, project_id, permission),
  CONSTRAINT management_grants_subject_check CHECK (length(subject) BETWEEN 1 AND 128),
  CONSTRAINT management_grants_project_id_check CHECK (length(project_id) BETWEEN 1 AND 128),
  CONSTRAINT management_grants_permission_check CHECK (permission IN ('run.read', 'run.stop', 'grants.write')),
  CONSTRAINT management_grants_granted_by_check CHECK (length(granted_by) BETWEEN 1 AND 128),
  CONSTRAINT management_grants_created_at_ms_check CHECK (created_at_ms >= 0)
);

ALTER TABLE run_events DROP CONSTRAINT run_events_type_check;
ALTER TABLE run_events ADD CONSTRAINT run_events_type_check CHECK (type IN ('run.cancel_requested', 'run.cancel_dispatched', 'run.cancel_dispatch_blocked', 'run.cancel_dispatch_failed', 'run.cancel_dispatch_rearmed', 'run.terminal'));
