// The runtime role's grants (design/postgres §D6), built for grantRuntime(): the migration owner's DDL
// giving `role` (an identifier already escaped) exactly its runtime privileges. Names are escaped here.
import { escapeIdentifier } from 'pg';

export const ROLE_SQL = {
  currentSchema: 'SELECT current_schema() AS name',
} as const;

export function grantSchemaUsageSql(schema: string, role: string): string {
  return `GRANT USAGE ON SCHEMA ${escapeIdentifier(schema)} TO ${role}`;
}

export function revokeTableSql(table: string, role: string): string {
  return `REVOKE ALL ON TABLE ${escapeIdentifier(table)} FROM ${role}`;
}

export function grantTableSql(privileges: readonly string[], table: string, role: string): string {
  return `GRANT ${privileges.join(', ')} ON TABLE ${escapeIdentifier(table)} TO ${role}`;
}

export function grantFunctionSql(signature: string, role: string): string {
  return `GRANT EXECUTE ON FUNCTION ${signature} TO ${role}`;
}
