// The PostgreSQL readiness check's statements (design/postgres §D6): the runtime role's table
// privileges, its existence and standing, and the connected role. Read-only, one transaction.
import { MIGRATIONS_TABLE } from '../migrations';

export const READINESS_SQL = {
  /** The connected role, when readiness checks the role it runs as. */
  currentUser: 'SELECT current_user AS name',
  /** One row per table and privilege, plus the role's schema CREATE and superuser bits. */
  privilegeRows: `SELECT t.name AS "table", p.name AS privilege,
    has_table_privilege($1::text, format('%I.%I', current_schema(), t.name), p.name) AS granted
  FROM unnest($2::text[]) AS t(name)
  CROSS JOIN unnest($3::text[]) AS p(name)
  ORDER BY t.name, p.name`,
  roleExists: 'SELECT 1 FROM pg_roles WHERE rolname = $1',
  roleFacts: `SELECT current_schema() AS schema,
    to_regclass(format('%I.%I', current_schema(), '${MIGRATIONS_TABLE}')) IS NOT NULL AS "hasMigrations",
    (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = $1) AS "bypasses",
    has_schema_privilege($1::text, current_schema(), 'CREATE') AS "canCreate",
    (SELECT r.rolname = $1 FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
      WHERE c.oid = to_regclass(format('%I.%I', current_schema(), '${MIGRATIONS_TABLE}'))) IS TRUE AS "ownsSchema"`,
} as const;
