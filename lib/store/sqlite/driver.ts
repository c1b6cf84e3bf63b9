// The better-sqlite3 database behind a store's SqliteDatabase (docs/decisions/0222). The store's own
// modules work on the driver's full type; what pidfence publishes names only SqliteDatabase, so its
// declarations need neither @types/better-sqlite3 nor @types/node. Nothing public returns a driver.
import type Database from 'better-sqlite3';

export type SqliteDriver = Database.Database;

/**
 * The driver of a database that openSqliteDatabase opened: it is one at run time. The parameter is
 * SqliteDatabase's shape, named structurally: database.ts imports this file, so this one imports nothing back.
 */
export function driverOf(database: {
  readonly name: string;
  readonly inTransaction: boolean;
  close(): unknown;
}): SqliteDriver {
  return database as SqliteDriver;
}
