// The one boundary between the SQLite stores and better-sqlite3 (design/architecture §7): every read
// and write of the five SQLite classes passes through it, so a driver failure (a closed connection,
// a damaged file, a missing table) always reaches the caller as the store's typed error, and every
// write is one short BEGIN IMMEDIATE transaction with the clock read under the write lock.
import type Database from 'better-sqlite3';

import { storeFailure } from '../store-errors';
import { readClock, type Clock } from './clock';
import type { SqliteDatabase } from './database';
import { prepareStatements, type PreparedStatements } from './statements';

type Work = (nowMs: number) => unknown;

/** The transaction functions of one connection, built once and shared by every class on it. */
interface Transactions {
  readonly write: Database.Transaction<(work: Work, clock: Clock) => unknown>;
  readonly snapshot: Database.Transaction<(work: () => unknown) => unknown>;
}

const transactionsByDatabase = new WeakMap<SqliteDatabase, Transactions>();

function transactionsOf(database: SqliteDatabase): Transactions {
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

export class SqliteBoundary {
  readonly database: SqliteDatabase;
  /** The shared statement set of this connection (runs, attempts, events, dispatch). */
  readonly statements: PreparedStatements;
  readonly #clock: Clock;
  readonly #transactions: Transactions;

  constructor(database: SqliteDatabase, clock: Clock = Date.now) {
    this.database = database;
    this.statements = prepareStatements(database);
    this.#clock = clock;
    this.#transactions = transactionsOf(database);
  }

  /** The store clock (design/dispatch §2.2: the store is the time authority), for reads that compare with now. */
  now(): number {
    return readClock(this.#clock);
  }

  /** Statements outside a transaction (one statement is atomic on its own). */
  read<T>(operation: string, work: () => T): T {
    try {
      return work();
    } catch (error) {
      throw storeFailure('sqlite', operation, error);
    }
  }

  /** Several reads as of one moment: one deferred (read) transaction. */
  snapshot<T>(operation: string, work: () => T): T {
    try {
      return this.#transactions.snapshot.deferred(work) as T;
    } catch (error) {
      throw storeFailure('sqlite', operation, error);
    }
  }

  /**
   * One BEGIN IMMEDIATE transaction; `work` gets the clock read after the write lock is held. A
   * throw inside rolls everything back (inside another write it becomes a savepoint of that one).
   */
  write<T>(operation: string, work: (nowMs: number) => T): T {
    try {
      return this.#transactions.write.immediate(work, this.#clock) as T;
    } catch (error) {
      throw storeFailure('sqlite', operation, error);
    }
  }
}
