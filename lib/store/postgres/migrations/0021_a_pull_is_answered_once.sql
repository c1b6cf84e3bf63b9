-- 0021: the id of the pull that granted a lease (docs/decisions/0437). A worker names each pull, and
-- the replica set sends a pull whose answer timed out to the next replica under the same name; that
-- replica answers the leases the first one granted under it, and grants none of its own. NULL: a
-- grant from a pull without a name (a worker of an earlier version).
ALTER TABLE run_dispatch_leases ADD COLUMN pull_id text CHECK (pull_id IS NULL OR length(pull_id) BETWEEN 1 AND 128);

-- A repeated pull finds its grants by session and name.
CREATE INDEX run_dispatch_leases_session_pull ON run_dispatch_leases (session_id, pull_id) WHERE pull_id IS NOT NULL;
