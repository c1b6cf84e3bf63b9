// PostgreSQL store fixtures for tests (design/architecture §7, docs/decisions/0004): a provisioned database
// migrated by its owner with the runtime grants, and contract stores connected as the runtime role.
import { randomBytes } from 'node:crypto';

import { Pool } from 'pg';

import { grantRuntime, migratePostgres } from '../../lib/store/postgres/index';
import { provisionDatabase, type ProvisionedDatabase } from './postgres';
import { silentPool } from './pg-pool';

export interface MigratedDatabase extends ProvisionedDatabase {
  /** A small pool connected as the migration owner (DDL, test-only writes). */
  readonly owner: Pool;
  /** A pool connected as the superuser to this database (catalog, WAL positions). */
  readonly admin: Pool;
  /** Ends both pools and drops the database and roles. */
  dispose(): Promise<void>;
}

/** The admin URL pointed at this database. */
export function adminUrlFor(database: ProvisionedDatabase): string {
  const url = new URL(database.adminUrl);
  url.pathname = `/${database.databaseName}`;
  return url.toString();
}

/**
 * A database with every migration applied by the owner and grantRuntime() done, on the shared test
 * server or, with `adminUrl`, on another (a throw-away cluster's superuser URL).
 */
export async function migratedDatabase(label: string, adminUrl?: string): Promise<MigratedDatabase> {
  const database = await provisionDatabase(label, adminUrl);
  try {
    await migratePostgres(database.ownerUrl);
    await grantRuntime(database.ownerUrl, database.runtimeRole);
  } catch (error) {
    await database.drop();
    throw error;
  }
  const owner = silentPool(database.ownerUrl);
  const admin = silentPool(adminUrlFor(database));
  return {
    ...database,
    owner,
    admin,
    dispose: async () => {
      await Promise.all([owner.end(), admin.end()]);
      await database.drop();
    },
  };
}

/**
 * One migrated database for a whole test file: provisioned once, dropped after the file's last
 * test. A failed provision fails every test that awaits it; nothing is skipped.
 */
export function migratedDatabaseForFile(
  test: { after: { always(hook: () => Promise<void>): void } },
  label: string,
): Promise<MigratedDatabase> {
  const ready = migratedDatabase(label);
  ready.catch(() => undefined);
  test.after.always(async () => {
    await ready.then(
      (database) => database.dispose(),
      () => undefined,
    );
  });
  return ready;
}

/** The runtime URL with a unique application_name, so a test can pick out this store's sessions. */
export function runtimeUrlNamed(
  database: ProvisionedDatabase,
  applicationName: string,
  settings: Readonly<Record<string, string>> = {},
): string {
  const url = new URL(database.runtimeUrl);
  url.searchParams.set('application_name', applicationName);
  const options = Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');
  if (options !== '') url.searchParams.set('options', options);
  return url.toString();
}

/**
 * The contract suite waits out 100 ms leases in real time; on a shared 2-core machine a commit that
 * waits for fsync behind another test's CREATE DATABASE can take longer than that. Its sessions
 * therefore commit without waiting for the flush (as the throw-away test cluster does anyway); the
 * gate 11 and fault tests keep the server's own setting.
 */
export const SUITE_SESSION_SETTINGS = { synchronous_commit: 'off' } as const;

export function uniqueApplicationName(prefix = 'pidfence_test'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/**
 * Makes every RunEvent append fail until the returned function restores it: a trigger installed by
 * the owner. With `applicationName` it fires only for that store's sessions, so tests running at
 * the same time in the same database are not affected.
 */
export async function injectPostgresEventAppendFailure(
  database: MigratedDatabase,
  applicationName?: string,
): Promise<() => Promise<void>> {
  const fn = `${applicationName ?? 'pidfence_test'}_fail_${randomBytes(4).toString('hex')}`;
  const only = applicationName === undefined ? 'true' : `current_setting('application_name') = '${applicationName}'`;
  await database.owner.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF ${only} THEN
        RAISE EXCEPTION 'injected event append failure';
      END IF;
      RETURN NEW;
    END $$`);
  await database.owner.query(`CREATE TRIGGER ${fn} BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
  return async () => {
    await database.owner.query(`DROP TRIGGER ${fn} ON run_events`);
    await database.owner.query(`DROP FUNCTION ${fn}()`);
  };
}
