-- 0008: run_events and management_audit are append-only history (docs/decisions/0047; design/dispatch gate
-- 15). The runtime role keeps SELECT and INSERT on them; UPDATE, DELETE and TRUNCATE granted to any
-- role by this owner are taken back here, and grantRuntime() no longer grants them.
DO $$
DECLARE
  holder text;
BEGIN
  FOR holder IN
    SELECT DISTINCT grantee FROM information_schema.role_table_grants
    WHERE table_schema = current_schema()
      AND table_name IN ('run_events', 'management_audit')
      AND privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
      AND grantee <> current_user
  LOOP
    EXECUTE format(
      'REVOKE UPDATE, DELETE, TRUNCATE ON TABLE run_events, management_audit FROM %s',
      CASE WHEN holder = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(holder) END
    );
  END LOOP;
END
$$;
