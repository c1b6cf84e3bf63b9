-- 0010: a project's runs, newest first (docs/decisions/0140): `pidfence list` pages them by the
-- (created_at_ms, id) keyset, all states or one. The same indexes as lib/store/sqlite/migrations/0007.

CREATE INDEX runs_by_project ON runs (project_id, created_at_ms, id);

CREATE INDEX runs_by_project_status ON runs (project_id, status, created_at_ms, id);
