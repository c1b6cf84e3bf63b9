// pidfence/sqlite: the edge/standalone store (design/architecture §7): open a WAL database, apply the numbered
// migrations, check readiness, and hand out the dispatch repository and the run store.
import { readClock, storeClockOf, type Clock } from './clock';
import {
  checkSqliteReadiness,
  migrateSqliteDatabase,
  openSqliteDatabaseCreating,
  removeUnfinishedDatabase,
  type SqliteDatabase,
  type SqliteOpenOptions,
} from './database';
import { isDiskFull, storeFull } from './disk-reserve';
import { SqliteDispatchRepository } from './dispatch-repository';
import { SqliteExecutionStore } from './execution-store';
import { SqliteManagementStore } from './management-store';
import { SqliteRunStore } from './run-store';
import { SqliteRunnerStore } from './runner-store';
import { keepDiskReserve } from './transaction';

export {
  checkSqliteReadiness,
  migrateSqliteDatabase,
  openSqliteDatabase,
  SQLITE_BUSY_TIMEOUT_DEFAULT_MS,
} from './database';
export type { SqliteDatabase, SqliteOpenOptions, SqliteSynchronous } from './database';
export { SqliteDispatchRepository } from './dispatch-repository';
export { SqliteRunStore } from './run-store';
export { SqliteExecutionStore } from './execution-store';
export { SqliteRunnerStore } from './runner-store';
export type { RunnerStore } from '../runner-store';
export type { ExecutionStore } from '../execution-store';
export { SqliteManagementStore } from './management-store';
export type { GrantAdministration, ManagementStore } from '../management-store';
export { BootAnchoredClock, storeClockOf, type Clock } from './clock';
export { DISK_RESERVE_BYTES, ensureDiskReserve, reservePath } from './disk-reserve';
export type { DispatchRepository } from '../dispatch-repository';
export type { RunStore } from '../run-store';

export interface SqliteStoreOptions extends SqliteOpenOptions {
  readonly clock?: Clock;
  /** Apply pending migrations on open (default true); false only checks readiness. */
  readonly migrate?: boolean;
  /**
   * The subject of the OS user who owns the file: it holds every grant on this store
   * (docs/decisions/0170). The caller proves it (the CLI compares the file's uid with its own).
   */
  readonly ownerSubject?: string;
  /**
   * Keep the disk reserve beside the file (docs/decisions/0191): write it now and again after it
   * was spent. Default: when this opening may create the store (a runner's, not a reader's).
   */
  readonly diskReserve?: boolean;
}

export interface SqliteStore {
  readonly database: SqliteDatabase;
  readonly dispatchRepository: SqliteDispatchRepository;
  readonly runStore: SqliteRunStore;
  readonly executionStore: SqliteExecutionStore;
  readonly runnerStore: SqliteRunnerStore;
  /** The management plane's store; also the owner's grant writes (the file's writer is its owner). */
  readonly managementStore: SqliteManagementStore;
  close(): void;
}

/** Opens (and by default migrates) a pidfence SQLite file; fails readiness on migration drift. */
export function openSqliteStore(filename: string, options: SqliteStoreOptions = {}): SqliteStore {
  const { database, created } = openSqliteDatabaseCreating(filename, options);
  try {
    keepDiskReserve(database, options.diskReserve ?? options.create !== false)?.maintain();
    // Migration rows record when people applied them: the wall clock.
    // A read-only store (docs/decisions/0226) is read as it is: no migration, no clock anchor written.
    const writable = options.readonly !== true;
    if (options.migrate !== false && writable)
      migrateSqliteDatabase(database, () => readClock(options.clock ?? Date.now));
    checkSqliteReadiness(database);
    // The first process of a boot writes its anchor here, not inside a later read (docs/decisions/0160).
    if (options.clock === undefined && writable) storeClockOf(database).prepare();
    const clock = options.clock === undefined ? {} : { clock: options.clock };
    return {
      database,
      dispatchRepository: new SqliteDispatchRepository(database, clock),
      runStore: new SqliteRunStore(database, clock),
      executionStore: new SqliteExecutionStore(database, clock),
      runnerStore: new SqliteRunnerStore(database, clock),
      managementStore: new SqliteManagementStore(database, {
        ...clock,
        ...(options.ownerSubject === undefined ? {} : { ownerSubject: options.ownerSubject }),
      }),
      close: () => database.close(),
    };
  } catch (error) {
    database.close();
    if (created) removeUnfinishedDatabase(filename);
    throw isDiskFull(error, filename)
      ? storeFull(filename, 'the store could not be opened, and nothing was changed', error)
      : error;
  }
}
