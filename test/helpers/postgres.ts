// A fresh database per test file with the two roles of design/architecture §7 / design/postgres §D6: a migration owner
// (owns database and schema, holds DDL) and a runtime role (LOGIN only; the store grants it
// SELECT/INSERT/UPDATE). Names are unique per process and call, because ava runs files in parallel.
import { randomBytes } from 'node:crypto';

import { Client } from 'pg';

import { PidfenceError } from '../../lib/base/errors';
import { secretsRedact } from './pg-cluster';

export const TEST_DATABASE_URL_ENV = 'PIDFENCE_TEST_DATABASE_URL';
export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
/** Every database and role the harness creates starts with this; the sweeper touches nothing else. */
export const TEST_OBJECT_PREFIX = 'pidfence_t_';
/** The schema the runtime role may use; the store creates its tables there as the owner. */
export const TEST_SCHEMA = 'public';
/** Leftovers older than this belong to a crashed run: a live test file never takes an hour. */
const STALE_AFTER_MS = 60 * 60 * 1_000;
/**
 * How long serverAnswers waits before with-postgres starts a server of its own. A missing server
 * refuses the connection at once; this bound only ends a connect that hangs.
 */
const ANSWER_TIMEOUT_MS = 3_000;
/**
 * Provisioning talks to a server that answered already. Its connect timer cannot tell a slow server
 * from this process's event loop being held (by a test's synchronous SQLite half, on a loaded
 * machine): when the loop turns again, the expired timer runs before the socket's answer is read,
 * and a server that replied in milliseconds looks absent. So the bound is a test's scale, not a
 * reply's; absence still shows at once as a refused connection.
 */
const ADMIN_CONNECT_TIMEOUT_MS = 60_000;
/** Bounds every admin statement (CREATE DATABASE copies a template: ~100 ms here). */
const ADMIN_STATEMENT_TIMEOUT_MS = 30_000;
/** Identifiers are at most 63 bytes; keep labels short enough for `<db>_own`. */
const LABEL_MAX_LENGTH = 16;

export interface ProvisionedDatabase {
  readonly adminUrl: string;
  /** Connects as the migration owner (DDL). */
  readonly ownerUrl: string;
  /** Connects as the runtime role (no DDL, no superuser). */
  readonly runtimeUrl: string;
  readonly databaseName: string;
  readonly ownerRole: string;
  readonly runtimeRole: string;
  readonly schema: string;
  /** Terminates other sessions, drops the database and both roles. Idempotent. */
  drop(): Promise<void>;
}

export interface SweepResult {
  readonly databases: readonly string[];
  readonly roles: readonly string[];
}

/** The admin URL tests use: PIDFENCE_TEST_DATABASE_URL (set by with-postgres) or the default. */
export function testDatabaseUrl(): string {
  const fromEnv = process.env[TEST_DATABASE_URL_ENV];
  return fromEnv === undefined || fromEnv === '' ? DEFAULT_TEST_DATABASE_URL : fromEnv;
}

/** Creates a unique database with an owner role and a runtime role; sweeps stale leftovers first. */
export async function provisionDatabase(label: string, adminUrl = testDatabaseUrl()): Promise<ProvisionedDatabase> {
  const names = testObjectNamesCreate(label);
  const ownerPassword = randomBytes(18).toString('base64url');
  const runtimePassword = randomBytes(18).toString('base64url');
  const drop = (): Promise<void> => databaseDrop(adminUrl, names);

  await withAdminClient(adminUrl, async (admin) => {
    await sweepStaleTestObjectsWith(admin, Date.now());
    try {
      await rolesAndDatabaseCreate(admin, names, ownerPassword, runtimePassword);
    } catch (error) {
      await drop().catch(() => undefined);
      throw provisionError(`creating ${names.databaseName} failed`, error);
    }
  });
  try {
    await withAdminClient(urlFor(adminUrl, { database: names.databaseName }), (admin) =>
      schemaPrivilegesSet(admin, names),
    );
  } catch (error) {
    await drop().catch(() => undefined);
    throw provisionError(`granting privileges in ${names.databaseName} failed`, error);
  }

  return {
    adminUrl,
    ownerUrl: urlFor(adminUrl, { database: names.databaseName, user: names.ownerRole, password: ownerPassword }),
    runtimeUrl: urlFor(adminUrl, { database: names.databaseName, user: names.runtimeRole, password: runtimePassword }),
    databaseName: names.databaseName,
    ownerRole: names.ownerRole,
    runtimeRole: names.runtimeRole,
    schema: TEST_SCHEMA,
    drop,
  };
}

/** Drops `pidfence_t_` databases and roles older than an hour (from a crashed or killed run). */
export async function sweepStaleTestObjects(adminUrl = testDatabaseUrl(), now = Date.now()): Promise<SweepResult> {
  return withAdminClient(adminUrl, (admin) => sweepStaleTestObjectsWith(admin, now));
}

/** True when a server answers `SELECT 1` at the URL within the connect timeout. */
export async function serverAnswers(url: string, timeoutMs = ANSWER_TIMEOUT_MS): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Names: pidfence_t_<label>_<pid>_<created, base36 seconds>_<random>, roles add _own / _run.
// The creation time lives in the name because PostgreSQL records none for databases or roles.

interface TestObjectNames {
  readonly databaseName: string;
  readonly ownerRole: string;
  readonly runtimeRole: string;
}

const TEST_NAME_PATTERN = new RegExp(`^${TEST_OBJECT_PREFIX}[a-z0-9_]*_\\d+_([0-9a-z]+)_[0-9a-f]{8}(?:_own|_run)?$`);

/** Exported for the sweeper test, which needs names that look old. */
export function testObjectNamesCreate(label: string, createdAtMs = Date.now()): TestObjectNames {
  const safeLabel = label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, LABEL_MAX_LENGTH);
  const created = Math.floor(createdAtMs / 1_000).toString(36);
  const databaseName = `${TEST_OBJECT_PREFIX}${safeLabel || 'db'}_${process.pid}_${created}_${randomBytes(4).toString('hex')}`;
  return { databaseName, ownerRole: `${databaseName}_own`, runtimeRole: `${databaseName}_run` };
}

function testObjectCreatedAtMs(name: string): number | undefined {
  const created = TEST_NAME_PATTERN.exec(name)?.[1];
  return created === undefined ? undefined : parseInt(created, 36) * 1_000;
}

function isStale(name: string, now: number): boolean {
  const createdAt = testObjectCreatedAtMs(name);
  return createdAt !== undefined && now - createdAt > STALE_AFTER_MS;
}

// ---------------------------------------------------------------------------------------------
// SQL

async function rolesAndDatabaseCreate(
  admin: Client,
  names: TestObjectNames,
  ownerPassword: string,
  runtimePassword: string,
): Promise<void> {
  const owner = admin.escapeIdentifier(names.ownerRole);
  const runtime = admin.escapeIdentifier(names.runtimeRole);
  const database = admin.escapeIdentifier(names.databaseName);
  // Passwords make the URLs work against servers that do not trust loopback; they never appear in errors.
  await admin.query(
    `CREATE ROLE ${owner} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD ${admin.escapeLiteral(ownerPassword)}`,
  );
  await admin.query(
    `CREATE ROLE ${runtime} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD ${admin.escapeLiteral(runtimePassword)}`,
  );
  await admin.query(`CREATE DATABASE ${database} OWNER ${owner}`);
  // Without this every role on the cluster (PUBLIC) could connect; the runtime role gets it explicitly.
  await admin.query(`REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
  await admin.query(`GRANT CONNECT ON DATABASE ${database} TO ${runtime}`);
}

async function schemaPrivilegesSet(admin: Client, names: TestObjectNames): Promise<void> {
  const schema = admin.escapeIdentifier(TEST_SCHEMA);
  // PostgreSQL < 15 lets PUBLIC create in `public`; make the owner the only role with DDL everywhere.
  await admin.query(`ALTER SCHEMA ${schema} OWNER TO ${admin.escapeIdentifier(names.ownerRole)}`);
  await admin.query(`REVOKE ALL ON SCHEMA ${schema} FROM PUBLIC`);
  await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${admin.escapeIdentifier(names.runtimeRole)}`);
}

async function databaseDrop(adminUrl: string, names: TestObjectNames): Promise<void> {
  await withAdminClient(adminUrl, async (admin) => {
    await databaseDropWith(admin, names.databaseName);
    for (const role of [names.runtimeRole, names.ownerRole]) {
      await admin.query(`DROP ROLE IF EXISTS ${admin.escapeIdentifier(role)}`);
    }
  });
}

async function databaseDropWith(admin: Client, databaseName: string): Promise<void> {
  // Pools from the test may still hold sessions; they would block DROP DATABASE.
  await admin.query(
    'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [databaseName],
  );
  await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(databaseName)} WITH (FORCE)`);
}

async function sweepStaleTestObjectsWith(admin: Client, now: number): Promise<SweepResult> {
  const like = `${TEST_OBJECT_PREFIX.replace(/_/g, '\\_')}%`;
  const staleNames = async (catalogQuery: string): Promise<string[]> =>
    (await admin.query<{ name: string }>(catalogQuery, [like])).rows
      .map((row) => row.name)
      .filter((name) => isStale(name, now));

  // Databases first: a role cannot be dropped while it still owns one.
  const databases = await sweepEach(
    await staleNames('SELECT datname AS name FROM pg_database WHERE datname LIKE $1'),
    (name) => databaseDropWith(admin, name),
  );
  const roles = await sweepEach(
    await staleNames('SELECT rolname AS name FROM pg_roles WHERE rolname LIKE $1'),
    (name) => admin.query(`DROP ROLE IF EXISTS ${admin.escapeIdentifier(name)}`),
  );
  return { databases, roles };
}

/**
 * Drops each name, returning those dropped. Another worker may sweep the same name at the same moment,
 * or a role may still own something elsewhere: a leftover is retried by the next sweep and must not fail
 * the provision that happened to run this one.
 */
async function sweepEach(names: readonly string[], dropOne: (name: string) => Promise<unknown>): Promise<string[]> {
  const dropped: string[] = [];
  for (const name of names) {
    try {
      await dropOne(name);
      dropped.push(name);
    } catch {
      continue;
    }
  }
  return dropped;
}

// ---------------------------------------------------------------------------------------------
// Connections

async function withAdminClient<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({
    connectionString: url,
    connectionTimeoutMillis: ADMIN_CONNECT_TIMEOUT_MS,
    statement_timeout: ADMIN_STATEMENT_TIMEOUT_MS,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new PidfenceError(
      `no PostgreSQL server answers at ${secretsRedact(url)} (${errorMessage(error)}): run the tests with \`npm test\` ` +
        `(it starts a throw-away server), or set ${TEST_DATABASE_URL_ENV} to a server where the user may create databases and roles`,
      'ERR_PIDFENCE_TEST_PG_UNAVAILABLE',
    );
  }
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The admin URL with another database and, optionally, another user and password. */
function urlFor(adminUrl: string, parts: { database: string; user?: string; password?: string }): string {
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(parts.database)}`;
  if (parts.user !== undefined) url.username = encodeURIComponent(parts.user);
  if (parts.password !== undefined) url.password = encodeURIComponent(parts.password);
  return url.toString();
}

function provisionError(what: string, error: unknown): PidfenceError {
  return new PidfenceError(`${what}: ${secretsRedact(errorMessage(error))}`, 'ERR_PIDFENCE_TEST_PG_PROVISION');
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
