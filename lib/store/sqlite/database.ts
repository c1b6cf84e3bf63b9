// Opening a pidfence SQLite database (design/architecture §7, design/dispatch §2.2): WAL, foreign keys, a busy
// timeout for the second process, numbered migrations with checksums, and the readiness check.
import { closeSync, constants as fsConstants, accessSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';

import Database from 'better-sqlite3';

import { PidfenceError } from '../../base/errors';
import { isDiskFull, storeFull } from './disk-reserve';
import { busyTimeoutPragma, CONNECTION_SQL, synchronousPragma } from './connection-statements';
import { driverOf } from './driver';
import {
  loadMigrations,
  migrationsDirectory,
  pendingMigrations,
  type AppliedMigration,
  type MigrationFile,
} from '../migrations';
import { MIGRATION_SQL } from './migration-statements';

/**
 * An open pidfence SQLite database. At run time it is better-sqlite3's `Database`; its declared type
 * names only what a caller needs to hold and close it, so the published declarations need neither
 * @types/better-sqlite3 nor @types/node (docs/decisions/0222). A program that has
 * @types/better-sqlite3 may cast it to `Database.Database` for the driver's own API.
 */
export interface SqliteDatabase {
  readonly name: string;
  readonly open: boolean;
  readonly readonly: boolean;
  readonly inTransaction: boolean;
  close(): unknown;
}

/** docs/decisions/0010: NORMAL for routine traffic, FULL for each acknowledged commit (durability.ts); FULL for all is one option away. */
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
  /**
   * Open for reading only (docs/decisions/0226): nothing is written, not even the WAL mode or
   * SQLite's -wal and -shm files. A store nobody has open (a backup, a forensic copy) is read from a
   * snapshot of its bytes in memory; one in use, in place with its writer's shared memory.
   */
  readonly readonly?: boolean;
}

/** New database files are readable and writable by their owner only (docs/decisions/0046). */
export const SQLITE_FILE_MODE = 0o600;

function storeUnavailable(message: string, errno?: string, cause?: unknown): PidfenceError {
  return new PidfenceError(message, 'ERR_PIDFENCE_STORE_UNAVAILABLE', {
    ...(errno === undefined ? {} : { errno }),
    cause,
  });
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
 * True when this call created the file.
 */
function sqliteFilePrepare(filename: string, create: boolean): boolean {
  let size: number | undefined;
  try {
    size = statSync(filename).size;
  } catch (error) {
    if (errnoOf(error) !== 'ENOENT')
      throw storeUnavailable(
        `cannot read ${filename} (${errnoOf(error) ?? 'UNKNOWN'}); check its permissions, or pass another --db.`,
        errnoOf(error),
        error,
      );
  }
  if (size === 0) {
    throw storeUnavailable(
      `${filename} is an empty file, not a pidfence database; remove it (pidfence creates a new one) or pass another --db.`,
    );
  }
  if (size !== undefined) return false;
  if (!create)
    throw storeUnavailable(`no pidfence database at ${filename}; pass --db <file|postgres-url> or set PIDFENCE_DB.`);
  const directory = path.dirname(filename);
  try {
    accessSync(directory, fsConstants.W_OK);
  } catch (error) {
    const errno = errnoOf(error);
    throw storeUnavailable(
      errno === 'ENOENT'
        ? `the directory ${directory} does not exist; create it, or pass --db with a file in an existing directory.`
        : `cannot create a database in ${directory} (${errno ?? 'UNKNOWN'}): the directory is not writable for this user; pass --db with a writable location.`,
      errno,
      error,
    );
  }
  try {
    closeSync(openSync(filename, 'wx', SQLITE_FILE_MODE));
    return true;
  } catch (error) {
    // Another process created it between the stat and here: open theirs.
    if (errnoOf(error) === 'EEXIST') return false;
    if (errnoOf(error) === 'ENOSPC' || errnoOf(error) === 'EDQUOT')
      throw storeFull(filename, 'no database could be created there, and nothing was started', error);
    throw storeUnavailable(
      `cannot create ${filename} (${errnoOf(error) ?? 'UNKNOWN'}); pass --db with a writable location.`,
      errnoOf(error),
      error,
    );
  }
}

/**
 * A database this opening created and could not finish (the disk filled up) is removed with its
 * -wal and -shm, so the next try does not find a 0-byte file that is "not a database".
 */
export function removeUnfinishedDatabase(filename: string): void {
  for (const file of [filename, `${filename}-wal`, `${filename}-shm`]) rmSync(file, { force: true });
}

/** SQLite's own refusals at open, as sentences; anything else stays the driver's error for the caller to wrap. */
function sqliteOpenFailure(filename: string, error: unknown): unknown {
  if (isDiskFull(error, filename))
    return storeFull(filename, 'the store could not be opened, and nothing was changed', error);
  const code = errnoOf(error);
  if (code === 'SQLITE_NOTADB')
    return new PidfenceError(
      `${filename} is not a SQLite database; pass the right --db, or move the file away so pidfence can create one.`,
      'ERR_PIDFENCE_STORE_CORRUPT',
      { errno: code, cause: error },
    );
  if (code === 'SQLITE_CORRUPT') return corrupt(filename, code, error);
  if (code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY' || code === 'SQLITE_PERM') {
    return storeUnavailable(
      `cannot open ${filename} for writing (${code}); check the file's and its directory's permissions, or pass another --db.`,
      code,
      error,
    );
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
  const rows = database.pragma(CONNECTION_SQL.quickCheck) as Array<{ quick_check?: unknown }>;
  if (rows.length !== 1 || rows[0]?.quick_check !== 'ok') throw corrupt(filename, 'QUICK_CHECK');
}

/** Longer than any of our write transactions by far (they are a few statements, no I/O waits). */
export const SQLITE_BUSY_TIMEOUT_DEFAULT_MS = 5_000;

/** Bytes 18 and 19 of a SQLite header: the file format versions, 2 for WAL, 1 for a rollback journal. */
const FORMAT_VERSION_BYTES = [18, 19] as const;

/** Whether a process has the store open, or left changes in its WAL: its -shm exists, or its -wal holds frames. */
function inUse(filename: string): boolean {
  const sizeOf = (file: string): number | null => {
    try {
      return statSync(file).size;
    } catch {
      return null;
    }
  };
  return sizeOf(`${filename}-shm`) !== null || (sizeOf(`${filename}-wal`) ?? 0) > 0;
}

/**
 * A read-only connection that writes nothing, not even SQLite's -wal and -shm files. A store in use
 * (its -shm is there, or its -wal holds changes) is opened read-only in place, with the shared
 * memory its writer keeps; a closed one is read from a snapshot of its bytes in memory, its header
 * marked non-WAL (SQLite cannot deserialize a WAL image).
 */
function openReadOnly(filename: string, driverOptions: Database.Options): Database.Database {
  try {
    accessSync(filename, fsConstants.R_OK);
  } catch (error) {
    throw storeUnavailable(
      `cannot read ${filename} (${errnoOf(error) ?? 'UNKNOWN'}): this user may not read it; check its permissions, or pass another --db.`,
      errnoOf(error),
      error,
    );
  }
  if (!inUse(filename)) {
    const image = readFileSync(filename);
    for (const at of FORMAT_VERSION_BYTES) if (image[at] === 2) image[at] = 1;
    return new Database(image, { ...driverOptions, readonly: true });
  }
  let database: Database.Database | undefined;
  try {
    database = new Database(filename, { ...driverOptions, readonly: true, fileMustExist: true });
    database.prepare(CONNECTION_SQL.readSchema).get();
    return database;
  } catch (error) {
    database?.close();
    throw storeUnavailable(
      `cannot read ${filename} read-only (${errnoOf(error) ?? 'UNKNOWN'}): its changes in ${filename}-wal need a writable -shm; copy the file and its -wal to a writable directory and pass --db with the copy.`,
      errnoOf(error),
      error,
    );
  }
}

/** An open connection, and whether opening it created its file (then a failed set-up removes it). */
export function openSqliteDatabase(filename: string, options: SqliteOpenOptions = {}): SqliteDatabase {
  return openSqliteDatabaseCreating(filename, options).database;
}

export function openSqliteDatabaseCreating(
  filename: string,
  options: SqliteOpenOptions = {},
): { readonly database: SqliteDatabase; readonly created: boolean } {
  const created =
    isFileName(filename) && sqliteFilePrepare(filename, options.create !== false && options.readonly !== true);
  try {
    return { database: openPrepared(filename, options), created };
  } catch (error) {
    if (created) removeUnfinishedDatabase(filename);
    throw error;
  }
}

function openPrepared(filename: string, options: SqliteOpenOptions): SqliteDatabase {
  const driverOptions: Database.Options = options.verbose ? { verbose: (sql) => options.verbose?.(String(sql)) } : {};
  let database: Database.Database;
  try {
    database =
      options.readonly === true ? openReadOnly(filename, driverOptions) : new Database(filename, driverOptions);
  } catch (error) {
    throw error instanceof PidfenceError ? error : sqliteOpenFailure(filename, error);
  }
  try {
    database.pragma(busyTimeoutPragma(Math.trunc(options.busyTimeoutMs ?? SQLITE_BUSY_TIMEOUT_DEFAULT_MS)));
    if (options.readonly !== true) database.pragma(CONNECTION_SQL.journalModeWal);
    database.pragma(synchronousPragma(options.synchronous === 'FULL' ? 'FULL' : 'NORMAL'));
    database.pragma(CONNECTION_SQL.foreignKeysOn);
    quickCheck(database, filename);
    return database;
  } catch (error) {
    database.close();
    throw error instanceof PidfenceError ? error : sqliteOpenFailure(filename, error);
  }
}

/** The package's own migration files, read and hashed once per process: an open migrates, then checks readiness. */
let packageFiles: readonly MigrationFile[] | undefined;
function packageMigrations(): readonly MigrationFile[] {
  packageFiles ??= loadMigrations(migrationsDirectory('sqlite'));
  return packageFiles;
}

function appliedMigrations(database: SqliteDatabase): AppliedMigration[] {
  return driverOf(database).prepare<[], AppliedMigration>(MIGRATION_SQL.selectApplied).all();
}

/**
 * Applies the pending numbered migrations, each with its checksum row, under BEGIN IMMEDIATE so two
 * processes opening a new file at once apply them exactly once. Throws on checksum drift. `files`
 * defaults to every migration of the package; a prefix of them leaves an older schema (migration tests).
 */
export function migrateSqliteDatabase(
  database: SqliteDatabase,
  clock: () => number = Date.now,
  files: readonly MigrationFile[] = packageMigrations(),
): string[] {
  const driver = driverOf(database);
  const migrate = driver.transaction(() => {
    driver.exec(MIGRATION_SQL.createTable);
    const pending = pendingMigrations(appliedMigrations(database), files);
    const record = driver.prepare(MIGRATION_SQL.recordApplied);
    for (const file of pending) {
      driver.exec(file.sql);
      record.run(file.version, file.name, file.checksum, clock());
    }
    return pending.map((file) => file.name);
  });
  return migrate.immediate();
}

/** Readiness: every migration applied, none changed since. Throws a PidfenceError that says what to do. */
export function checkSqliteReadiness(database: SqliteDatabase): void {
  const files = packageMigrations();
  const hasTable = driverOf(database).prepare(MIGRATION_SQL.hasTable).get();
  const pending = pendingMigrations(hasTable ? appliedMigrations(database) : [], files);
  if (pending.length > 0) {
    throw new PidfenceError(
      `the database lacks ${pending.length} migration(s) (first: ${pending[0]?.name}); open it with migrate enabled or run the migrations first.`,
      'ERR_PIDFENCE_MIGRATION_PENDING',
    );
  }
}
