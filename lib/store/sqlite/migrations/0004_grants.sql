-- 0004: management grants (design/dispatch §5.1; §5; docs/decisions/0040): which subject holds which
-- permission on which project. Written only by the store owner; every management call reads it.
-- Also admits the `run.cancel_dispatch_rearmed` RunEvent written by rearm (design/dispatch §6 gate 15).

CREATE TABLE management_grants (
  subject        TEXT    NOT NULL CHECK (length(subject) BETWEEN 1 AND 128),
  project_id     TEXT    NOT NULL CHECK (length(project_id) BETWEEN 1 AND 128),
  permission     TEXT    NOT NULL CHECK (permission IN ('run.read', 'run.stop', 'grants.write')),
  granted_by     TEXT    NOT NULL CHECK (length(granted_by) BETWEEN 1 AND 128),
  created_at_ms  INTEGER NOT NULL CHECK (created_at_ms >= 0),
  PRIMARY KEY (subject, project_id, permission)
) STRICT, WITHOUT ROWID;

-- SQLite cannot change a CHECK in place: run_events is rebuilt with the new type (same columns,
-- same key, same foreign key; nothing references run_events, so the drop checks nothing).
CREATE TABLE run_events_0004 (
  run_id         TEXT    NOT NULL REFERENCES runs (id),
  seq            INTEGER NOT NULL CHECK (seq >= 1),
  id             TEXT    NOT NULL,
  type           TEXT    NOT NULL CHECK (type IN ('run.cancel_requested', 'run.cancel_dispatched', 'run.cancel_dispatch_blocked', 'run.cancel_dispatch_failed', 'run.cancel_dispatch_rearmed', 'run.terminal')),
  payload        TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 1024),
  created_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

INSERT INTO run_events_0004 (run_id, seq, id, type, payload, created_at_ms)
  SELECT run_id, seq, id, type, payload, created_at_ms FROM run_events;
DROP TABLE run_events;
ALTER TABLE run_events_0004 RENAME TO run_events;
