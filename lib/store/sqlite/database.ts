// Opening a pidfence SQLite database (DESIGN §7, ADR-0005 §2.2): WAL, foreign keys, a busy
// timeout for the second process, numbered migrations with checksums, and the readiness check.
import Database from 'better-sqlite3';

import { PidfenceError } from '../../base/errors';
import { loadMigrations, migrationsDirectory, pendingMigrations, type AppliedMigration } from '../migrations';

export type SqliteDatabase = Database.Database;

/** See docs/decisions/0010: the edge profile commits with NORMAL; FULL is one option away. */
export type SqliteSynchronous = 'NORMAL' | 'FULL';

export interface SqliteOpenOptions {
  readonly synchronous?: SqliteSynchronous;
  /** How long a writer waits for another process's transaction before SQLITE_BUSY. */
  readonly busyTimeoutMs?: number;
  /** Called with every SQL statement executed (tests prove "no SQL ran"; benchmarks count). */
  readonly verbose?: (sql: string) => void;
}

/** Longer than any of our write transactions by far (they are a few statements, no I/O waits). */
export const SQLITE_BUSY_TIMEOUT_DEFAULT_MS = 5_000;

const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS pidfence_migrations (
  version        INTEGER NOT NULL PRIMARY KEY,
  name           TEXT    NOT NULL,
  checksum       TEXT    NOT NULL,
  applied_at_ms  INTEGER NOT NULL
) STRICT`;

export function openSqliteDatabase(filename: string, options: SqliteOpenOptions = {}): SqliteDatabase {
  const database = new Database(filename, options.verbose ? { verbose: (sql) => options.verbose?.(String(sql)) } : {});
  try {
    database.pragma('journal_mode = WAL');
    database.pragma(`synchronous = ${options.synchronous === 'FULL' ? 'FULL' : 'NORMAL'}`);
    database.pragma('foreign_keys = ON');
    database.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? SQLITE_BUSY_TIMEOUT_DEFAULT_MS)}`);
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}

function appliedMigrations(database: SqliteDatabase): AppliedMigration[] {
  return database.prepare<[], AppliedMigration>('SELECT version, name, checksum FROM pidfence_migrations ORDER BY version').all();
}

/**
 * Applies the pending numbered migrations, each with its checksum row, under BEGIN IMMEDIATE so two
 * processes opening a new file at once apply them exactly once. Throws on checksum drift.
 */
export function migrateSqliteDatabase(database: SqliteDatabase, clock: () => number = Date.now): string[] {
  const files = loadMigrations(migrationsDirectory('sqlite'));
  const migrate = database.transaction(() => {
    database.exec(MIGRATIONS_TABLE);
    const pending = pendingMigrations(appliedMigrations(database), files);
    const record = database.prepare('INSERT INTO pidfence_migrations (version, name, checksum, applied_at_ms) VALUES (?, ?, ?, ?)');
    for (const file of pending) {
      database.exec(file.sql);
      record.run(file.version, file.name, file.checksum, clock());
    }
    return pending.map((file) => file.name);
  });
  return migrate.immediate();
}

/** Readiness: every migration applied, none changed since. Throws a PidfenceError that says what to do. */
export function checkSqliteReadiness(database: SqliteDatabase): void {
  const files = loadMigrations(migrationsDirectory('sqlite'));
  const hasTable = database.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'pidfence_migrations'").get();
  const pending = pendingMigrations(hasTable ? appliedMigrations(database) : [], files);
  if (pending.length > 0) {
    throw new PidfenceError(
      `the database lacks ${pending.length} migration(s) (first: ${pending[0]?.name}); open it with migrate enabled or run the migrations first.`,
      'ERR_PIDFENCE_MIGRATION_PENDING',
    );
  }
}
