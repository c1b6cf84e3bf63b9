// pidfence/sqlite: the edge/standalone store (design/architecture §7): open a WAL database, apply the numbered
// migrations, check readiness, and hand out the dispatch repository and the run store.
import { readClock, type Clock } from './clock';
import { checkSqliteReadiness, migrateSqliteDatabase, openSqliteDatabase, type SqliteDatabase, type SqliteOpenOptions } from './database';
import { SqliteDispatchRepository } from './dispatch-repository';
import { SqliteExecutionStore } from './execution-store';
import { SqliteManagementStore } from './management-store';
import { SqliteRunStore } from './run-store';
import { SqliteRunnerStore } from './runner-store';

export { checkSqliteReadiness, migrateSqliteDatabase, openSqliteDatabase, SQLITE_BUSY_TIMEOUT_DEFAULT_MS } from './database';
export type { SqliteDatabase, SqliteOpenOptions, SqliteSynchronous } from './database';
export { SqliteDispatchRepository } from './dispatch-repository';
export { SqliteRunStore } from './run-store';
export { SqliteExecutionStore } from './execution-store';
export { SqliteRunnerStore } from './runner-store';
export type { RunnerStore } from '../runner-store';
export type { ExecutionStore } from '../execution-store';
export { SqliteManagementStore } from './management-store';
export type { GrantAdministration, ManagementStore } from '../management-store';
export type { Clock } from './clock';
export type { DispatchRepository } from '../dispatch-repository';
export type { RunStore } from '../run-store';

export interface SqliteStoreOptions extends SqliteOpenOptions {
  readonly clock?: Clock;
  /** Apply pending migrations on open (default true); false only checks readiness. */
  readonly migrate?: boolean;
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
  const clock = options.clock ?? Date.now;
  const database = openSqliteDatabase(filename, options);
  try {
    if (options.migrate !== false) migrateSqliteDatabase(database, () => readClock(clock));
    checkSqliteReadiness(database);
    return {
      database,
      dispatchRepository: new SqliteDispatchRepository(database, { clock }),
      runStore: new SqliteRunStore(database, { clock }),
      executionStore: new SqliteExecutionStore(database, { clock }),
      runnerStore: new SqliteRunnerStore(database, { clock }),
      managementStore: new SqliteManagementStore(database, { clock }),
      close: () => database.close(),
    };
  } catch (error) {
    database.close();
    throw error;
  }
}
