// The one boundary between the SQLite stores and better-sqlite3 (design/architecture §7): one per
// open store, shared by its five classes (docs/decisions/0261); every read and write passes through it, so a driver failure (a closed connection,
// a damaged file, a missing table) always reaches the caller as the store's typed error, and every
// write is one short BEGIN IMMEDIATE transaction with the clock read under the write lock. A full
// disk is ERR_PIDFENCE_STORE_FULL; a stop-path write first spends the disk reserve (docs/decisions/0191).
import type Database from 'better-sqlite3';

import { monotonicMs } from '../../native/index';
import { storeFailure } from '../store-errors';
import { readClock, storeClockOf, type Clock } from './clock';
import type { SqliteDatabase } from './database';
import { DiskReserveKeeper, isDiskFull, storeFull } from './disk-reserve';
import { driverOf, type SqliteDriver } from './driver';
import { ACKNOWLEDGED_WRITES, STOP_PATH_WRITES, withSyncedCommit } from './durability';
import { lazyPreparedSet, SQL, type Prepared, type PreparedStatements } from './prepared';

type Work = (nowMs: number) => unknown;

/** The transaction functions of one connection, built once and shared by every class on it. */
interface Transactions {
  readonly write: Database.Transaction<(work: Work, clock: Clock) => unknown>;
  readonly snapshot: Database.Transaction<(work: () => unknown) => unknown>;
}

const transactionsByDatabase = new WeakMap<SqliteDriver, Transactions>();

function transactionsOf(database: SqliteDriver): Transactions {
  let transactions = transactionsByDatabase.get(database);
  if (transactions === undefined) {
    transactions = {
      write: database.transaction((work: Work, clock: Clock) => work(readClock(clock))),
      snapshot: database.transaction((work: () => unknown) => work()),
    };
    transactionsByDatabase.set(database, transactions);
  }
  return transactions;
}

const reserves = new WeakMap<SqliteDatabase, DiskReserveKeeper | null>();

/**
 * The disk reserve of a connection's file (docs/decisions/0191): `write` when this opener keeps one
 * (openSqliteStore of a store it may create); a connection without one may still give it back.
 */
export function keepDiskReserve(database: SqliteDatabase, write: boolean): DiskReserveKeeper | null {
  const driver = driverOf(database);
  const file = driver.memory || driver.name === '' || driver.readonly ? null : driver.name;
  const keeper = file === null ? null : new DiskReserveKeeper(file, { write, now: monotonicMs });
  reserves.set(database, keeper);
  return keeper;
}

function reserveOf(database: SqliteDatabase): DiskReserveKeeper | null {
  return reserves.has(database) ? (reserves.get(database) ?? null) : keepDiskReserve(database, false);
}

/** What a write may do beyond the defaults of its operation's name (durability.ts). */
export interface WriteOptions {
  /** Commit with a fsync of the WAL (default: the operation is in ACKNOWLEDGED_WRITES). */
  readonly synced?: boolean;
  /** May spend the disk reserve when the disk is full (default: the operation is in STOP_PATH_WRITES). */
  readonly reserve?: boolean;
}

function defaultClockOf(database: SqliteDatabase): Clock {
  const clock = storeClockOf(database);
  return () => clock.now();
}

/** The boundaries of each connection, one per clock: openSqliteStore gives its five classes one clock, so one boundary. */
const boundariesByDatabase = new WeakMap<SqliteDriver, Map<Clock | undefined, SqliteBoundary>>();

/**
 * The boundary of this connection and clock, made on first use (docs/decisions/0261): every class
 * constructed on the same open store (the same database and clock) shares it, its transactions and
 * its statements. `clock` defaults to the connection's boot-anchored store clock (docs/decisions/0160).
 */
export function boundaryOf(database: SqliteDatabase, clock?: Clock): SqliteBoundary {
  const driver = driverOf(database);
  let boundaries = boundariesByDatabase.get(driver);
  if (boundaries === undefined) {
    boundaries = new Map();
    boundariesByDatabase.set(driver, boundaries);
  }
  let boundary = boundaries.get(clock);
  if (boundary === undefined) {
    boundary = new SqliteBoundary(database, clock);
    boundaries.set(clock, boundary);
  }
  return boundary;
}

/** Statement sets of each connection, by SQL constant, shared by every boundary on it (whatever its clock). */
const statementSets = new WeakMap<SqliteDriver, Map<object, object>>();

function statementSetOf<S extends Readonly<Record<string, string>>>(database: SqliteDriver, sql: S): Prepared<S> {
  let sets = statementSets.get(database);
  if (sets === undefined) {
    sets = new Map();
    statementSets.set(database, sets);
  }
  let set = sets.get(sql) as Prepared<S> | undefined;
  if (set === undefined) {
    set = lazyPreparedSet(database, sql);
    sets.set(sql, set);
  }
  return set;
}

export class SqliteBoundary {
  readonly database: SqliteDriver;
  /** The shared statement set of this connection (runs, attempts, events, dispatch), each prepared on first use. */
  readonly statements: PreparedStatements;
  readonly #clock: Clock;
  readonly #transactions: Transactions;

  /** Use boundaryOf: one boundary per open store. */
  constructor(database: SqliteDatabase, clock?: Clock) {
    this.database = driverOf(database);
    this.statements = statementSetOf(this.database, SQL);
    this.#clock = clock ?? defaultClockOf(database);
    this.#transactions = transactionsOf(this.database);
  }

  /** A concept's statement set on this connection (a module constant), each statement prepared on first use. */
  sql<S extends Readonly<Record<string, string>>>(set: S): Prepared<S> {
    return statementSetOf(this.database, set);
  }

  /** The store clock (design/dispatch §2.2: the store is the time authority), for reads that compare with now. */
  now(): number {
    return readClock(this.#clock);
  }

  /** Statements outside a transaction (one statement is atomic on its own). */
  read<T>(operation: string, work: () => T): T {
    try {
      return this.#looked(work());
    } catch (error) {
      throw this.#failure(operation, error);
    }
  }

  /** Several reads as of one moment: one deferred (read) transaction. */
  snapshot<T>(operation: string, work: () => T): T {
    try {
      return this.#looked(this.#transactions.snapshot.deferred(work) as T);
    } catch (error) {
      throw this.#failure(operation, error);
    }
  }

  /**
   * One BEGIN IMMEDIATE transaction; `work` gets the clock read after the write lock is held. A
   * throw inside rolls everything back (inside another write it becomes a savepoint of that one).
   * An acknowledged write's commit is synced before this returns (docs/decisions/0010). On a full
   * disk a stop-path write gives the disk reserve back and tries once more (docs/decisions/0191).
   */
  write<T>(operation: string, work: (nowMs: number) => T, options: WriteOptions = {}): T {
    const synced = options.synced ?? ACKNOWLEDGED_WRITES.has(operation);
    const attempt = (): T => {
      const commit = (): T => this.#transactions.write.immediate(work, this.#clock) as T;
      return synced ? withSyncedCommit(this.database, commit) : commit();
    };
    const nested = this.database.inTransaction;
    try {
      return this.#looked(attempt());
    } catch (error) {
      const reserve = reserveOf(this.database);
      const spend =
        !nested &&
        reserve !== null &&
        isDiskFull(error, reserve.file) &&
        (options.reserve ?? STOP_PATH_WRITES.has(operation)) &&
        reserve.release();
      if (!spend) throw this.#failure(operation, error);
    }
    try {
      return attempt();
    } catch (error) {
      throw this.#failure(operation, error);
    }
  }

  /** After a read or write that worked: the disk reserve is looked after (rarely: docs/decisions/0191). */
  #looked<T>(result: T): T {
    reserveOf(this.database)?.maintain();
    return result;
  }

  /** A full disk in its own words (which store, which filesystem); anything else as the store's failure. */
  #failure(operation: string, error: unknown): Error {
    const reserve = reserveOf(this.database);
    if (reserve !== null && isDiskFull(error, reserve.file))
      return storeFull(reserve.file, `${operation} could not be written and nothing was changed`, error);
    return storeFailure('sqlite', operation, error);
  }
}
