// Opening a pidfence SQLite database (design/architecture §7, design/dispatch §2.2): WAL, foreign keys, a busy
// timeout for the second process, numbered migrations with checksums, and the readiness check.
import { closeSync, constants as fsConstants, accessSync, openSync, statSync } from 'node:fs';
import path from 'node:path';

import Database from 'better-sqlite3';

import { PidfenceError } from '../../base/errors';
import { loadMigrations, migrationsDirectory, pendingMigrations, type AppliedMigration, type MigrationFile } from '../migrations';

export type SqliteDatabase = Database.Database;

/** See docs/decisions/0010: the edge profile commits with NORMAL; FULL is one option away. */
export type SqliteSynchronous = 'NORMAL' | 'FULL';

export interface SqliteOpenOptions {
  readonly synchronous?: SqliteSynchronous;
  /** How long a writer waits for another process's transaction before SQLITE_BUSY. */
  readonly busyTimeoutMs?: number;
  /** Called with every SQL statement executed (tests prove "no SQL ran"; benchmarks count). */
  readonly verbose?: (sql: string) => void;
  /**
   * Create the file when it does not exist (default true). Commands that only read or request
   * (cancel, inspect, status) pass false, so a wrong directory never grows a stray database.
   */
  readonly create?: boolean;
}

/** New database files are readable and writable by their owner only (docs/decisions/0046). */
export const SQLITE_FILE_MODE = 0o600;

function storeUnavailable(message: string, errno?: string, cause?: unknown): PidfenceError {
  return new PidfenceError(message, 'ERR_PIDFENCE_STORE_UNAVAILABLE', { ...(errno === undefined ? {} : { errno }), cause });
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** In-memory and temporary databases have no file to check. */
function isFileName(filename: string): boolean {
  return filename !== '' && filename !== ':memory:' && !filename.startsWith('file:');
}

/**
 * Store trouble as one sentence each (issue 15): a missing or unwritable directory, a missing file
 * when creating is not allowed, and a 0-byte file, which SQLite would silently turn into a database.
 * A new file is created here with SQLITE_FILE_MODE; SQLite gives its -wal and -shm files the same mode.
 */
function sqliteFilePrepare(filename: string, create: boolean): void {
  let size: number | undefined;
  try {
    size = statSync(filename).size;
  } catch (error) {
    if (errnoOf(error) !== 'ENOENT') throw storeUnavailable(`cannot read ${filename} (${errnoOf(error) ?? 'UNKNOWN'}); check its permissions, or pass another --db.`, errnoOf(error), error);
  }
  if (size === 0) {
    throw storeUnavailable(`${filename} is an empty file, not a pidfence database; remove it (pidfence creates a new one) or pass another --db.`);
  }
  if (size !== undefined) return;
  if (!create) throw storeUnavailable(`no pidfence database at ${filename}; pass --db <file|postgres-url> or set PIDFENCE_DB.`);
  const directory = path.dirname(filename);
  try {
    accessSync(directory, fsConstants.W_OK);
  } catch (error) {
    const errno = errnoOf(error);
    throw storeUnavailable(errno === 'ENOENT'
      ? `the directory ${directory} does not exist; create it, or pass --db with a file in an existing directory.`
      : `cannot create a database in ${directory} (${errno ?? 'UNKNOWN'}): the directory is not writable for this user; pass --db with a writable location.`, errno, error);
  }
  try {
    closeSync(openSync(filename, 'wx', SQLITE_FILE_MODE));
  } catch (error) {
    // Another process created it between the stat and here: open theirs.
    if (errnoOf(error) !== 'EEXIST') throw storeUnavailable(`cannot create ${filename} (${errnoOf(error) ?? 'UNKNOWN'}); pass --db with a writable location.`, errnoOf(error), error);
  }
}

/** SQLite's own refusals at open, as sentences; anything else stays the driver's error for the caller to wrap. */
function sqliteOpenFailure(filename: string, error: unknown): unknown {
  const code = errnoOf(error);
  if (code === 'SQLITE_NOTADB') return new PidfenceError(`${filename} is not a SQLite database; pass the right --db, or move the file away so pidfence can create one.`, 'ERR_PIDFENCE_STORE_CORRUPT', { errno: code, cause: error });
  if (code === 'SQLITE_CORRUPT') return corrupt(filename, code, error);
  if (code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY' || code === 'SQLITE_PERM') {
    return storeUnavailable(`cannot open ${filename} for writing (${code}); check the file's and its directory's permissions, or pass another --db.`, code, error);
  }
  return error;
}

function corrupt(filename: string, errno: string, cause?: unknown): PidfenceError {
  return new PidfenceError(
    `${filename} is damaged (SQLite's integrity check failed); restore it from a backup or move it away, and nothing was changed.`,
    'ERR_PIDFENCE_STORE_CORRUPT',
    { errno, cause },
  );
}

/** PRAGMA quick_check at open: a partly corrupted database is an error, never a clear status. */
function quickCheck(database: Database.Database, filename: string): void {
  const rows = database.pragma('quick_check(1)') as Array<{ quick_check?: unknown }>;
  if (rows.length !== 1 || rows[0]?.quick_check !== 'ok') throw corrupt(filename, 'QUICK_CHECK');
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
  if (isFileName(filename)) sqliteFilePrepare(filename, options.create !== false);
  let database: Database.Database;
  try {
    database = new Database(filename, options.verbose ? { verbose: (sql) => options.verbose?.(String(sql)) } : {});
  } catch (error) {
    throw sqliteOpenFailure(filename, error);
  }
  try {
    database.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? SQLITE_BUSY_TIMEOUT_DEFAULT_MS)}`);
    database.pragma('journal_mode = WAL');
    database.pragma(`synchronous = ${options.synchronous === 'FULL' ? 'FULL' : 'NORMAL'}`);
    database.pragma('foreign_keys = ON');
    quickCheck(database, filename);
    return database;
  } catch (error) {
    database.close();
    throw error instanceof PidfenceError ? error : sqliteOpenFailure(filename, error);
  }
}

function appliedMigrations(database: SqliteDatabase): AppliedMigration[] {
  return database.prepare<[], AppliedMigration>('SELECT version, name, checksum FROM pidfence_migrations ORDER BY version').all();
}

/**
 * Applies the pending numbered migrations, each with its checksum row, under BEGIN IMMEDIATE so two
 * processes opening a new file at once apply them exactly once. Throws on checksum drift. `files`
 * defaults to every migration of the package; a prefix of them leaves an older schema (migration tests).
 */
export function migrateSqliteDatabase(
  database: SqliteDatabase,
  clock: () => number = Date.now,
  files: readonly MigrationFile[] = loadMigrations(migrationsDirectory('sqlite')),
): string[] {
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
