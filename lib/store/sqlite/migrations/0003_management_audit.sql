-- 0003: the management audit trail (design/architecture §5, design/dispatch §5; §6 gate 15): who rearmed which run, when,
-- against which expected fence. Written in the same transaction as the rearm and its RunEvent.

CREATE TABLE management_audit (
  id                TEXT    NOT NULL PRIMARY KEY,
  run_id            TEXT    NOT NULL,
  project_id        TEXT    NOT NULL,
  action            TEXT    NOT NULL CHECK (action IN ('rearm')),
  actor             TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 128),
  expected_version  INTEGER NOT NULL CHECK (expected_version >= 0),
  expected_result   TEXT    NOT NULL,
  created_at_ms     INTEGER NOT NULL,
  FOREIGN KEY (run_id, project_id) REFERENCES runs (id, project_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX management_audit_by_run ON management_audit (run_id, created_at_ms);
