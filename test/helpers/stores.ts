// The one home of the stores tests run against: the contract suite (test/store), the dispatch tests
// (test/dispatch) and the crash-window children. One TestStore shape, one factory per store kind;
// a new store adds its factory here and every suite runs on it unchanged (docs/decisions/0092).
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { Permission } from '../../lib/contract/index';
import type { DispatchRepository } from '../../lib/store/dispatch-repository';
import type { ManagementStore } from '../../lib/store/management-store';
import type { RunStore } from '../../lib/store/run-store';
import type { RunnerStore } from '../../lib/store/runner-store';
import {
  openPostgresStore,
  PostgresGrantAdministration,
  type PostgresStore,
  type PostgresStoreOptions,
} from '../../lib/store/postgres/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import {
  injectPostgresEventAppendFailure,
  migratedDatabase,
  runtimeUrlNamed,
  uniqueApplicationName,
  type MigratedDatabase,
} from './pg-store';
import { installPostgresTestClock } from './pg-test-clock';
import { delay } from './wait';
import { driverOf } from '../../lib/store/sqlite/driver';

export interface StoreConnection {
  readonly repository: DispatchRepository;
  readonly runStore: RunStore;
  close(): Promise<void>;
}

/** What the contract suite needs of a store. */
export interface ContractStore extends StoreConnection {
  /** Runners own attempts; a due page for one runner sees only its own (docs/decisions/0070). */
  readonly runnerStore: RunnerStore;
  /** Moves the store's clock forward (an injected offset on SQLite, the test clock or real time on PostgreSQL). */
  advanceTime(ms: number): Promise<void>;
  /** True where advanceTime moves a clock without waiting, so a test may use leases long enough to outlast any stall. */
  readonly timeIsVirtual?: boolean;
  /** Makes every RunEvent append fail until the returned function restores it. */
  injectEventAppendFailure(): Promise<() => Promise<void>>;
  /** The database's bytes on disk (file + WAL), where the store can expose them. */
  rawBytes?(): Buffer;
}

export interface ContractStoreFactory {
  readonly name: string;
  open(): Promise<ContractStore>;
}

export interface TestStore extends ContractStore {
  /** Getters: restart() replaces the connection behind them. */
  readonly repository: DispatchRepository;
  readonly runStore: RunStore;
  /** The management store on the same connection (rearm), as the runtime sees it. */
  readonly managementStore: ManagementStore;
  /** Writes a grant as the store's owner would (the file owner on SQLite, the migration owner on PostgreSQL). */
  grant(subject: string, projectId: string, permission: Permission): Promise<void>;
  /** What another process passes to attach() to reach the same store (a file path, a URL). */
  readonly location: string;
  /** Another connection to the same store sharing this store's clock: a second worker. */
  connect(): Promise<StoreConnection>;
  /** Closes the connection and opens a new one to the same data: a process restart. */
  restart(): Promise<void>;
  /** Changes whenever this connection has written anything (for "idle is free"). */
  writeMarker(): Promise<string>;
  close(): Promise<void>;
}

export interface TestStoreFactory extends ContractStoreFactory {
  open(): Promise<TestStore>;
  /** Used by child processes: a connection to `location` on the store's real clock. */
  attach(location: string): Promise<StoreConnection>;
}

/** A SQLite database's bytes on disk: the file and its WAL. */
export function sqliteFileBytes(file: string): Buffer {
  return Buffer.concat([file, `${file}-wal`].filter((name) => existsSync(name)).map((name) => readFileSync(name)));
}

function sqliteConnection(store: SqliteStore): StoreConnection {
  return { repository: store.dispatchRepository, runStore: store.runStore, close: async () => store.close() };
}

const sqliteFactory: TestStoreFactory = {
  name: 'sqlite',
  async open() {
    const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-dispatch-'));
    const file = path.join(dir, 'pidfence.db');
    // Real time plus an offset, so a child process on the real clock shares the same timeline.
    let offsetMs = 0;
    const clock = () => Date.now() + offsetMs;
    const writes: string[] = [];
    const openMain = () =>
      openSqliteStore(file, {
        clock,
        verbose: (sql) => {
          if (!/^\s*SELECT\b/i.test(sql)) writes.push(sql);
        },
      });
    let main = openMain();
    const others: SqliteStore[] = [];
    return {
      get repository() {
        return main.dispatchRepository;
      },
      get runStore() {
        return main.runStore;
      },
      get runnerStore() {
        return main.runnerStore;
      },
      get managementStore() {
        return main.managementStore;
      },
      grant: async (subject, projectId, permission) => {
        await main.managementStore.writeGrant({ subject, projectId, permission }, 'test-owner');
      },
      location: file,
      advanceTime: async (ms) => {
        offsetMs += ms;
      },
      timeIsVirtual: true,
      connect: async () => {
        const other = openSqliteStore(file, { clock, migrate: false });
        others.push(other);
        return sqliteConnection(other);
      },
      restart: async () => {
        main.close();
        main = openMain();
      },
      injectEventAppendFailure: async () => {
        driverOf(main.database).exec(
          "CREATE TRIGGER test_fail_event_append BEFORE INSERT ON run_events BEGIN SELECT RAISE(ABORT, 'injected event append failure'); END",
        );
        return async () => {
          driverOf(main.database).exec('DROP TRIGGER test_fail_event_append');
        };
      },
      rawBytes: () => sqliteFileBytes(file),
      writeMarker: async () => {
        const changes = (driverOf(main.database).prepare('SELECT total_changes() AS n').get() as { n: number }).n;
        const wal = existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0;
        return JSON.stringify({ changes, wal, writeStatements: writes.length });
      },
      close: async () => {
        for (const other of others) if (other.database.open) other.close();
        main.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  async attach(location) {
    return sqliteConnection(openSqliteStore(location, { migrate: false }));
  },
};

function postgresConnection(store: PostgresStore): StoreConnection {
  return { repository: store.dispatchRepository, runStore: store.runStore, close: () => store.close() };
}

const TABLES = ['runs', 'attempts', 'run_events', 'cancellation_dispatches', 'management_audit'] as const;

// PostgreSQL keeps its own clock (transaction_timestamp()). The URL carries the test-only clock
// (test/helpers/pg-test-clock.ts): advanceTime moves it, and every connection on that URL, in this
// process or a child, shares the moved timeline.
const postgresFactory: TestStoreFactory = {
  name: 'postgres',
  async open() {
    const database = await migratedDatabase('dispatch');
    const testClock = await installPostgresTestClock(database.admin, database, `pidfence_dispatch_${process.pid}`);
    const url = testClock.url;
    let main = await openPostgresStore(url);
    const others: PostgresStore[] = [];
    return {
      get repository() {
        return main.dispatchRepository;
      },
      get runStore() {
        return main.runStore;
      },
      get runnerStore() {
        return main.runnerStore;
      },
      get managementStore() {
        return main.managementStore;
      },
      grant: async (subject, projectId, permission) => {
        await new PostgresGrantAdministration(database.owner).writeGrant(
          { subject, projectId, permission },
          'test-owner',
        );
      },
      location: url,
      advanceTime: (ms) => testClock.advance(ms),
      timeIsVirtual: true,
      connect: async () => {
        const other = await openPostgresStore(url);
        others.push(other);
        return postgresConnection(other);
      },
      restart: async () => {
        await main.close();
        main = await openPostgresStore(url);
      },
      injectEventAppendFailure: () => injectPostgresEventAppendFailure(database),
      // Every INSERT or UPDATE (even a no-op one) gives a row a new xmin: if no row's xmin or
      // position changed, nothing was written to these tables by anyone.
      writeMarker: async () => {
        const parts: string[] = [];
        for (const table of TABLES) {
          const { rows } = await database.admin.query<{ m: string | null }>(
            `SELECT md5(string_agg(xmin::text || '@' || ctid::text, ',' ORDER BY ctid)) AS m FROM ${table}`,
          );
          parts.push(`${table}=${rows[0]?.m ?? 'empty'}`);
        }
        return parts.join(' ');
      },
      close: async () => {
        for (const other of others) await other.close();
        await main.close();
        await database.dispose();
      },
    };
  },
  async attach(location) {
    return postgresConnection(await openPostgresStore(location));
  },
};

/**
 * `PIDFENCE_TEST_STORES=sqlite` lists only those store kinds (comma-separated): `npm run test:unit`
 * sets it, so the suites that run on every store run on SQLite alone where no PostgreSQL is
 * (docs/decisions/0232). `npm test` leaves it unset: every store.
 */
export const TEST_STORES_ENV = 'PIDFENCE_TEST_STORES';

function selectedFactories(
  all: readonly TestStoreFactory[],
  selection: string | undefined,
): readonly TestStoreFactory[] {
  if (selection === undefined || selection === '') return all;
  const names = selection.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !all.some((factory) => factory.name === name));
  if (unknown.length > 0) {
    throw new Error(
      `${TEST_STORES_ENV} names no store ${unknown.join(', ')}; use ${all.map((f) => f.name).join(' or ')}`,
    );
  }
  return all.filter((factory) => names.includes(factory.name));
}

export const storeFactories: readonly TestStoreFactory[] = selectedFactories(
  [sqliteFactory, postgresFactory],
  process.env[TEST_STORES_ENV],
);

export function storeFactory(name: string): TestStoreFactory {
  const factory = storeFactories.find((candidate) => candidate.name === name);
  if (factory === undefined) throw new Error(`no test store named ${name}`);
  return factory;
}

/** For tests about the dispatch layer itself, not a store: the first store, closed at teardown. */
export async function openFirstStore(t: { teardown(fn: () => Promise<void>): void }): Promise<TestStore> {
  const factory = storeFactories[0];
  if (factory === undefined) throw new Error('no test store');
  const store = await factory.open();
  t.teardown(() => store.close());
  return store;
}

/**
 * A contract store as the runtime role in a database the caller shares between tests (one per test
 * file): real time passes in advanceTime, so the suite also proves the store on the database's own
 * clock with no test clock in the way; the event-append failure fires only for this store's
 * application_name.
 */
export async function openContractStore(
  database: MigratedDatabase,
  options: PostgresStoreOptions = {},
  settings: Readonly<Record<string, string>> = {},
): Promise<ContractStore & { store: PostgresStore; applicationName: string }> {
  const applicationName = uniqueApplicationName();
  const store = await openPostgresStore(runtimeUrlNamed(database, applicationName, settings), {
    maxConnections: 8,
    ...options,
  });
  return {
    store,
    applicationName,
    repository: store.dispatchRepository,
    runStore: store.runStore,
    runnerStore: store.runnerStore,
    advanceTime: (ms) => delay(ms),
    injectEventAppendFailure: () => injectPostgresEventAppendFailure(database, applicationName),
    close: () => store.close(),
  };
}
