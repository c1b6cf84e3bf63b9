-- 0013: a run's name (docs/decisions/0251): a label for people, given with `pidfence run --name` or
-- the control plane's POST /v1/jobs, shown by list, show and the status page. Not unique (a name
-- recurs across a job's runs) and never an identity; the same closed character set as lib/contract
-- validateRunName.

ALTER TABLE runs ADD COLUMN name text
  CONSTRAINT runs_name_check CHECK (name IS NULL OR name ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$');
