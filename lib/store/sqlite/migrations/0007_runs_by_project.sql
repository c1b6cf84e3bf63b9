-- 0007: a project's runs, newest first (docs/decisions/0140): `pidfence list` pages them by the
-- (created_at_ms, id) keyset, all states or one. Neither key column changes after the insert, so
-- the first index is written once per run; the second moves with the run's status.

CREATE INDEX runs_by_project ON runs (project_id, created_at_ms, id);

CREATE INDEX runs_by_project_status ON runs (project_id, status, created_at_ms, id);
