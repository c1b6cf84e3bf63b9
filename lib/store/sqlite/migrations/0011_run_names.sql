-- 0011: a run's name (docs/decisions/0251): a label for people, given with `pidfence run --name`,
-- shown by list, show and the status page. Not unique (a name recurs across a job's runs) and never
-- an identity; the same closed character set as lib/contract validateRunName.

ALTER TABLE runs ADD COLUMN name TEXT CHECK (
  name IS NULL OR (length(name) BETWEEN 1 AND 64 AND name GLOB '[A-Za-z0-9]*' AND name NOT GLOB '*[^A-Za-z0-9._:@-]*')
);
