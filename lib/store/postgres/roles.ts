// The runtime role's privileges (design/postgres §D6; design/architecture §7): SELECT, INSERT, UPDATE on the pidfence
// tables and read-only access to the migration record; never DELETE, TRUNCATE, REFERENCES, TRIGGER
// or CREATE. grantRuntime() is run by the migration owner; readiness checks the same table.
import { escapeIdentifier } from 'pg';

import { PidfenceError, PidfenceTypeError } from '../../base/errors';
import { withPool, type PostgresTarget } from './connection';
import { MIGRATIONS_TABLE } from './migrate';
import { grantFunctionSql, grantSchemaUsageSql, grantTableSql, revokeTableSql, ROLE_SQL } from './role-statements';
import { inTransaction } from './transaction';

export const TABLE_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] as const;
export type TablePrivilege = (typeof TABLE_PRIVILEGES)[number];

/** What the runtime role must hold on each table: exactly these privileges, no others. */
export const RUNTIME_PRIVILEGES: Readonly<Record<string, readonly TablePrivilege[]>> = Object.freeze({
  runs: ['SELECT', 'INSERT', 'UPDATE'],
  attempts: ['SELECT', 'INSERT', 'UPDATE'],
  // History is append-only (docs/decisions/0047): a runtime role cannot rewrite or erase it.
  run_events: ['SELECT', 'INSERT'],
  cancellation_dispatches: ['SELECT', 'INSERT', 'UPDATE'],
  management_audit: ['SELECT', 'INSERT'],
  attempt_events: ['SELECT', 'INSERT', 'UPDATE'],
  receipt_journal: ['SELECT', 'INSERT', 'UPDATE'],
  runners: ['SELECT', 'INSERT', 'UPDATE'],
  // Cluster delivery (docs/decisions/0100): sessions, jobs and run-dispatch leases.
  worker_sessions: ['SELECT', 'INSERT', 'UPDATE'],
  cluster_jobs: ['SELECT', 'INSERT', 'UPDATE'],
  run_dispatch_leases: ['SELECT', 'INSERT', 'UPDATE'],
  // The fleet's hold and its audit (docs/decisions/0240, 0241): the audit is append-only like management_audit.
  cluster_workers: ['SELECT', 'INSERT', 'UPDATE'],
  worker_audit: ['SELECT', 'INSERT'],
  // Grants are written by the owner only (docs/decisions/0040): a runtime replica cannot raise its own.
  management_grants: ['SELECT'],
  // Readiness reads the migration record as the runtime role.
  [MIGRATIONS_TABLE]: ['SELECT'],
});

/**
 * The dispatch functions of migrations 0007, 0012, 0013, 0016, 0018 and 0020 (docs/decisions/0021, 0024, 0231, 0340): SECURITY
 * INVOKER, so they act with the table privileges above; the runtime role gains only EXECUTE on them.
 */
export const RUNTIME_FUNCTIONS: readonly string[] = Object.freeze([
  'pidfence_set_limits()',
  'pidfence_dispatch_json(cancellation_dispatches)',
  'pidfence_claim(text, text, bigint, text, text, bigint)',
  'pidfence_record_result(text, text, text, text, bigint, text, text, bigint, boolean, text, text)',
  'pidfence_lock_page(text[], text[])',
  'pidfence_claim_page(text[], text[], bigint[], text, text[], bigint)',
  'pidfence_claim_due_page(text[], text[], bigint[], text, text[], bigint)',
  'pidfence_record_results(text[], text[], text[], text[], bigint[], text[], text[], bigint[], boolean[], text[], text[])',
  'pidfence_lease_tick(text, text, text[], text[], bigint[], bigint)',
  'pidfence_lapsed_leases(integer)',
  'pidfence_insert_pending_dispatches(text[], bigint)',
  'pidfence_cancel_project(text, text, integer)',
  'pidfence_write_cancel_intents(text[], text[], text, bigint)',
  'pidfence_end_queued_cancels(text[], bigint)',
  'pidfence_request_cancel(text, text, text)',
]);

const ROLE_NAME = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

export function validateRoleName(role: unknown): string {
  if (typeof role !== 'string' || !ROLE_NAME.test(role)) {
    throw new PidfenceTypeError(
      'runtimeRole must be a PostgreSQL role name: a letter or _ then up to 62 letters, digits, _ or $.',
      'ERR_PIDFENCE_INVALID_ROLE',
    );
  }
  return role;
}

/**
 * Gives `runtimeRole` exactly RUNTIME_PRIVILEGES (revoking anything else it was granted directly)
 * and USAGE on the current schema. Run as the migration owner after migratePostgres().
 */
export async function grantRuntime(target: PostgresTarget, runtimeRole: string): Promise<void> {
  const name = validateRoleName(runtimeRole);
  const role = escapeIdentifier(name);
  try {
    await grantRuntimeTo(target, role);
  } catch (error) {
    // 42704 undefined_object: the only object these GRANTs name that migrations do not make is the role.
    if ((error as PidfenceError).errno === UNDEFINED_OBJECT) {
      throw new PidfenceError(
        `the role ${name} does not exist on this server; create it first (CREATE ROLE ${name} LOGIN PASSWORD '...', as a superuser or a CREATEROLE holder), then run grant-runtime again.`,
        'ERR_PIDFENCE_PG_ROLE_MISSING',
        { errno: UNDEFINED_OBJECT, cause: error },
      );
    }
    throw error;
  }
}

const UNDEFINED_OBJECT = '42704';

async function grantRuntimeTo(target: PostgresTarget, role: string): Promise<void> {
  await withPool(target, (pool) =>
    inTransaction(pool, 'grantRuntime', async (tx) => {
      const [schema] = await tx.rows<{ name: string }>(ROLE_SQL.currentSchema, []);
      await tx.exec(grantSchemaUsageSql(schema?.name ?? 'public', role));
      for (const [table, privileges] of Object.entries(RUNTIME_PRIVILEGES)) {
        await tx.exec(revokeTableSql(table, role));
        await tx.exec(grantTableSql(privileges, table, role));
      }
      for (const signature of RUNTIME_FUNCTIONS) await tx.exec(grantFunctionSql(signature, role));
    }),
  );
}
