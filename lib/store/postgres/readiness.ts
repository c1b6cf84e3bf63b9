// Readiness of a PostgreSQL database for the runtime role (design/postgres §D6; design/architecture §5, §7): every
// migration applied with its recorded checksum, and the runtime role holding exactly its privileges,
// read from the catalog. Works as the runtime role itself. Each failure names what to do.
import { PidfenceError } from '../../base/errors';
import { pendingMigrations, type MigrationFile } from '../migrations';
import { storeInvariant } from '../store-errors';
import { withPool, type PostgresTarget } from './connection';
import { appliedMigrations, postgresMigrations } from './migrate';
import { READINESS_SQL } from './readiness-statements';
import { RUNTIME_PRIVILEGES, TABLE_PRIVILEGES, validateRoleName, type TablePrivilege } from './roles';
import { inTransaction, type Tx } from './transaction';

export interface PostgresReadiness {
  /** The number of the last applied migration (every one of them checked). */
  readonly schemaVersion: number;
  readonly schema: string;
  readonly runtimeRole: string;
}

export interface ReadinessOptions {
  /** The role the store connects as; defaults to the connected role (readiness run by the runtime). */
  readonly runtimeRole?: string;
}

/** How to give a role its runtime privileges, from the CLI and from a program. */
const grantRuntimeHint = (role: string): string =>
  `run \`pidfence grant-runtime ${role} --db <migration-owner-url>\` (grantRuntime('${role}') from a program)`;

/** A readiness sentence names a few privileges, not a catalogue: the rest follow from the same fix. */
const LISTED_MAX = 4;

function notReady(message: string, code: string): PidfenceError {
  return new PidfenceError(message, code);
}

/**
 * Checks schema version, migration checksums and the runtime role's privileges; returns what it
 * found or throws a PidfenceError: ERR_PIDFENCE_MIGRATION_PENDING / _CHECKSUM / _UNKNOWN,
 * ERR_PIDFENCE_PG_ROLE_MISSING, ERR_PIDFENCE_PG_PRIVILEGE_MISSING, ERR_PIDFENCE_PG_PRIVILEGE_EXCESS.
 */
export async function postgresReadiness(
  target: PostgresTarget,
  options: ReadinessOptions = {},
): Promise<PostgresReadiness> {
  const files = postgresMigrations();
  return withPool(target, (pool) =>
    inTransaction(pool, 'readiness', async (tx) => {
      const role = await existingRuntimeRole(tx, options.runtimeRole);
      const facts = await roleFacts(tx, role);
      await requireMigrationsApplied(tx, facts, files);
      const { missing, excess } = await privilegeDifferences(tx, role);
      requireRuntimeGrants(role, facts, missing);
      requireNothingMore(role, facts, excess);
      return { schemaVersion: files.length, schema: facts.schema, runtimeRole: role };
    }),
  );
}

/** The named runtime role, or the connected one (readiness run by the runtime); it must exist. */
async function existingRuntimeRole(tx: Tx, runtimeRole: string | undefined): Promise<string> {
  const role =
    runtimeRole === undefined
      ? ((await tx.rows<{ name: string }>(READINESS_SQL.currentUser, []))[0]?.name ?? '')
      : validateRoleName(runtimeRole);
  if ((await tx.rows(READINESS_SQL.roleExists, [role])).length === 0) {
    throw notReady(
      `the runtime role ${role} does not exist; create it (LOGIN, no other attributes) and run grantRuntime() as the migration owner.`,
      'ERR_PIDFENCE_PG_ROLE_MISSING',
    );
  }
  return role;
}

interface RoleFacts {
  readonly schema: string;
  readonly hasMigrations: boolean;
  readonly bypasses: boolean;
  readonly canCreate: boolean;
  readonly ownsSchema: boolean;
}

async function roleFacts(tx: Tx, role: string): Promise<RoleFacts> {
  const [facts] = await tx.rows<RoleFacts>(READINESS_SQL.roleFacts, [role]);
  if (facts === undefined) throw storeInvariant('postgres', 'readiness', 'the role facts query returned no row');
  return facts;
}

async function requireMigrationsApplied(tx: Tx, facts: RoleFacts, files: readonly MigrationFile[]): Promise<void> {
  const pending = pendingMigrations(facts.hasMigrations ? await appliedMigrations(tx) : [], files);
  if (pending.length > 0) {
    throw notReady(
      `schema ${facts.schema} lacks ${pending.length} pidfence migration(s) (first: ${pending[0]?.name}); run migratePostgres() as the migration owner, then grantRuntime().`,
      'ERR_PIDFENCE_MIGRATION_PENDING',
    );
  }
}

interface PrivilegeRow {
  readonly table: string;
  readonly privilege: TablePrivilege;
  readonly granted: boolean;
}

/** The runtime privileges the role lacks and the table privileges it holds beyond them. */
async function privilegeDifferences(
  tx: Tx,
  role: string,
): Promise<{ missing: PrivilegeRow[]; excess: PrivilegeRow[] }> {
  const tables = Object.keys(RUNTIME_PRIVILEGES);
  const rows = await tx.rows<PrivilegeRow>(READINESS_SQL.privilegeRows, [role, tables, TABLE_PRIVILEGES]);
  const isRuntime = (row: PrivilegeRow): boolean => (RUNTIME_PRIVILEGES[row.table] ?? []).includes(row.privilege);
  return {
    missing: rows.filter((row) => !row.granted && isRuntime(row)),
    excess: rows.filter((row) => row.granted && !isRuntime(row)),
  };
}

function listedPrivileges(found: readonly PrivilegeRow[]): string {
  const named = found
    .slice(0, LISTED_MAX)
    .map((row) => `${row.privilege} on ${row.table}`)
    .join(', ');
  return found.length > LISTED_MAX ? `${named} and ${found.length - LISTED_MAX} more` : named;
}

/** The role holds every runtime privilege, and is neither a superuser nor the migration owner. */
function requireRuntimeGrants(role: string, facts: RoleFacts, missing: readonly PrivilegeRow[]): void {
  if (missing.length > 0) {
    throw notReady(
      `the runtime role ${role} lacks ${listedPrivileges(missing)}; ${grantRuntimeHint(role)}.`,
      'ERR_PIDFENCE_PG_PRIVILEGE_MISSING',
    );
  }
  if (facts.bypasses) {
    throw notReady(
      `${role} is a superuser (or bypasses row security); pidfence does not run with such a role. Connect with the runtime role's URL, made with \`pidfence grant-runtime <role> --db <owner-url>\`.`,
      'ERR_PIDFENCE_STORE_SUPERUSER',
    );
  }
  // The migration owner's URL where the runtime role's belongs: no grant fixes that, the URL does (docs/decisions/0228).
  if (facts.ownsSchema) {
    throw notReady(
      `${role} owns the pidfence tables: it is the migration owner, for migrate, grant-runtime and grant only. Connect with the runtime role's URL, made ready with \`pidfence grant-runtime <role> --db <migration-owner-url>\`.`,
      'ERR_PIDFENCE_STORE_OWNER',
    );
  }
}

/** No schema CREATE and no table privilege beyond the runtime ones. */
function requireNothingMore(role: string, facts: RoleFacts, excess: readonly PrivilegeRow[]): void {
  const extra = [
    ...(facts.canCreate ? [`CREATE on schema ${facts.schema}`] : []),
    ...(excess.length > 0 ? [listedPrivileges(excess)] : []),
  ];
  if (extra.length > 0) {
    throw notReady(
      `the runtime role ${role} holds more than its runtime privileges: ${extra.join('; ')}. Connect as a plain LOGIN role, ` +
        `revoke the rest (\`pidfence grant-runtime ${role} --db <migration-owner-url>\` revokes direct table grants; check role memberships and schema grants) and check again.`,
      'ERR_PIDFENCE_PG_PRIVILEGE_EXCESS',
    );
  }
}
