// One short BEGIN IMMEDIATE write transaction with the clock read under the lock, and a driver
// failure mapped to the project's store error (design/architecture §7), and the same mapping for reads. Shared by
// the SQLite stores.
import { storeFailure } from '../store-errors';
import { readClock, type Clock } from './clock';
import type { SqliteDatabase } from './database';

export function runSqliteWrite<T>(database: SqliteDatabase, clock: Clock, operation: string, work: (nowMs: number) => T): T {
  try {
    return database.transaction(() => work(readClock(clock))).immediate();
  } catch (error) {
    throw storeFailure('sqlite', operation, error);
  }
}

/** A read outside a transaction, with a driver failure mapped like a write's. */
export function runSqliteRead<T>(operation: string, work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw storeFailure('sqlite', operation, error);
  }
}
