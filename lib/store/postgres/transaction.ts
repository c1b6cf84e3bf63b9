// The one place that talks to a pg connection for the PostgreSQL store (design/postgres §D3, §D7-D8; design/architecture §7):
// BEGIN with the SET LOCAL limits, COMMIT / ROLLBACK, bigint parsing, and pg errors mapped to typed
// PidfenceErrors whose messages carry a stable code and advice, never SQL text or parameters.
import type { CustomTypesConfig, Pool, PoolClient, QueryConfig, QueryResultRow } from 'pg';
import { types as pgTypes } from 'pg';

import { PidfenceError } from '../../base/errors';
import { storeFailure } from '../store-errors';
import { beginSql, TRANSACTION_SQL } from './transaction-statements';

/**
 * design/postgres §Impact: statement 5 s, lock 1 s, idle in transaction 10 s bound every
 * lock wait. One simple-protocol round trip opens the transaction with all three.
 */
export const STATEMENT_TIMEOUT = '5s';
export const LOCK_TIMEOUT = '1s';
export const IDLE_IN_TRANSACTION_TIMEOUT = '10s';
export const STATEMENT_TIMEOUT_MS = 5_000;
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;

export interface TransactionLimits {
  /** A PostgreSQL interval literal in seconds such as '5s'; only the migration transaction widens it. */
  readonly statementTimeout: string;
}

/**
 * How long the client waits for any one answer (docs/decisions/0045): the server's statement
 * timeout plus a margin for the round trip. It bounds a server that stopped answering, which no
 * server-side timeout can: a SIGSTOPped or partitioned server never says anything.
 */
export const CLIENT_MARGIN_MS = 2_000;

export function clientTimeoutMs(limits: TransactionLimits): number {
  const seconds = /^(\d+)s$/.exec(limits.statementTimeout);
  if (seconds === null) throw new Error(`statement timeout ${limits.statementTimeout} is not whole seconds`);
  return Number(seconds[1]) * 1_000 + CLIENT_MARGIN_MS;
}

const DEFAULT_LIMITS: TransactionLimits = { statementTimeout: STATEMENT_TIMEOUT };

function beginWith(limits: TransactionLimits): string {
  return beginSql(limits.statementTimeout, LOCK_TIMEOUT, IDLE_IN_TRANSACTION_TIMEOUT);
}

const BEGIN = beginWith(DEFAULT_LIMITS);

/** Connections already checked, and whether their synchronous_commit was raised. */
const raisedCommits = new WeakMap<PoolClient, boolean>();

/**
 * Acknowledged means durable (docs/decisions/0010): a commit pidfence answers after must be flushed.
 * A server, database or role default of synchronous_commit = off is raised to `on` for pidfence's
 * sessions (once per connection, and again in every transaction it opens, should a pooler reset
 * the session); a choice the connection made itself (its startup options, a SET) is the caller's
 * and is kept. `local`, `remote_write`, `remote_apply` already flush locally and are kept too.
 */
async function checkDurableCommits(client: PoolClient): Promise<void> {
  if (raisedCommits.has(client)) return;
  const result = await client.query({
    text: TRANSACTION_SQL.raiseSynchronousCommit,
    query_timeout: clientTimeoutMs(DEFAULT_LIMITS),
  } as QueryConfigWithTimeout);
  raisedCommits.set(client, result.rows.length > 0);
}

const INT8_OID = 20;

/** bigint columns (epoch ms, versions, counters) as JS numbers; every value we store is a safe integer. */
function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new PidfenceError(
      'a bigint column holds a value beyond 2^53; the database was written outside pidfence.',
      'ERR_PIDFENCE_INVALID_RECORD',
    );
  }
  return value;
}

/** Passed with every query, so a caller's pool keeps its own (or the global) parsers untouched. */
export const TYPES: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : pgTypes.getTypeParser(oid, format ?? 'text')) as CustomTypesConfig['getTypeParser'],
};

/** A statement runner bound to one checked-out connection inside an open transaction. */
export interface Tx {
  rows<R extends QueryResultRow>(text: string, values: readonly unknown[]): Promise<R[]>;
  /** Runs parameterless SQL, possibly several statements (migration files), by the simple protocol. */
  exec(text: string): Promise<void>;
  /** The backend process id of this connection (tests terminate it to prove rollback on loss). */
  readonly processId: number;
}

/** Codes of store failures; each message below says what happened and what to do. */
export type StoreErrorCode =
  | 'ERR_PIDFENCE_STORE_LOCK_TIMEOUT'
  | 'ERR_PIDFENCE_STORE_STATEMENT_TIMEOUT'
  | 'ERR_PIDFENCE_STORE_CONFLICT'
  | 'ERR_PIDFENCE_STORE_UNAVAILABLE'
  | 'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN'
  | 'ERR_PIDFENCE_STORE_PRIVILEGE'
  | 'ERR_PIDFENCE_STORE_SCHEMA'
  | 'ERR_PIDFENCE_STORE_AUTH'
  | 'ERR_PIDFENCE_STORE_NO_DATABASE';

const ADVICE: Readonly<Record<StoreErrorCode, string>> = {
  ERR_PIDFENCE_STORE_LOCK_TIMEOUT: `waited longer than the ${LOCK_TIMEOUT} lock timeout for a row another transaction holds; the transaction was rolled back and nothing was written. Retry; if it keeps happening, look for long transactions on the pidfence tables.`,
  ERR_PIDFENCE_STORE_STATEMENT_TIMEOUT: `ran longer than the ${STATEMENT_TIMEOUT} statement timeout; the transaction was rolled back and nothing was written. Check the server's load and the pidfence indexes.`,
  ERR_PIDFENCE_STORE_CONFLICT:
    'hit a serialization failure or deadlock; the transaction was rolled back and nothing was written. Retry.',
  ERR_PIDFENCE_STORE_UNAVAILABLE:
    'lost or could not get its database connection; nothing was committed. Check that the server is up and reachable, then retry.',
  ERR_PIDFENCE_STORE_COMMIT_UNKNOWN:
    'lost the connection while committing: the change may or may not be durable. Read the record again before retrying; the fences make a retry safe.',
  ERR_PIDFENCE_STORE_PRIVILEGE:
    'was refused by the database for lack of a privilege; nothing was written. Run postgresReadiness() and grantRuntime() as the migration owner.',
  ERR_PIDFENCE_STORE_AUTH:
    "was refused at login: the user name or password in the URL is wrong, or pg_hba.conf does not admit this user from here. Check the URL (or PGPASSWORD / ~/.pgpass) and the server's pg_hba.conf.",
  ERR_PIDFENCE_STORE_NO_DATABASE:
    'cannot find the database named in the URL on this server. Create it (createdb, as the owner) or fix the name in the URL.',
  ERR_PIDFENCE_STORE_SCHEMA:
    'found the pidfence schema missing or different; nothing was written. Run migratePostgres() as the migration owner, then postgresReadiness().',
};

/** SQLSTATE → code. Class 08 and the 57P0x shutdown/termination states mean the session is gone. */
function codeForSqlState(sqlState: string): StoreErrorCode | undefined {
  if (sqlState === '55P03') return 'ERR_PIDFENCE_STORE_LOCK_TIMEOUT';
  if (sqlState === '57014') return 'ERR_PIDFENCE_STORE_STATEMENT_TIMEOUT';
  if (sqlState === '40001' || sqlState === '40P01') return 'ERR_PIDFENCE_STORE_CONFLICT';
  if (sqlState.startsWith('08') || /^57P0[1-4]$/.test(sqlState) || sqlState === '25P03')
    return 'ERR_PIDFENCE_STORE_UNAVAILABLE';
  if (sqlState === '42501') return 'ERR_PIDFENCE_STORE_PRIVILEGE';
  // Class 28: invalid authorization (28000: no role or no pg_hba entry; 28P01: wrong password).
  if (sqlState.startsWith('28')) return 'ERR_PIDFENCE_STORE_AUTH';
  if (sqlState === '3D000') return 'ERR_PIDFENCE_STORE_NO_DATABASE';
  if (sqlState === '42P01' || sqlState === '42703' || sqlState === '42883') return 'ERR_PIDFENCE_STORE_SCHEMA';
  return undefined;
}

function storeError(code: StoreErrorCode, operation: string, errno: string, cause?: unknown): PidfenceError {
  return new PidfenceError(`the postgres store ${ADVICE[code]} (during ${operation}, ${errno})`, code, {
    errno,
    cause,
  });
}

/**
 * Maps anything a pg call threw to a PidfenceError. A server error has a SQLSTATE (`code` of 5
 * characters plus `severity`); anything else from the driver is a socket or protocol failure.
 * Only codes travel: the driver's message may quote SQL, values or constraint details.
 */
export function pgFailure(operation: string, error: unknown): Error {
  if (error instanceof PidfenceError) return error;
  const fields = typeof error === 'object' && error !== null ? (error as { code?: unknown; severity?: unknown }) : {};
  const code = typeof fields.code === 'string' ? fields.code : undefined;
  if (code !== undefined && typeof fields.severity === 'string') {
    const mapped = codeForSqlState(code);
    return mapped === undefined
      ? storeFailure('postgres', operation, error)
      : storeError(mapped, operation, code, error);
  }
  return storeError(
    'ERR_PIDFENCE_STORE_UNAVAILABLE',
    operation,
    code ?? driverTimeout(error) ?? 'CONNECTION_LOST',
    error,
  );
}

/** pg's own timeouts carry no code, only these fixed messages (client.js); name them for the reader. */
function driverTimeout(error: unknown): string | undefined {
  const message = (error as { message?: unknown } | null)?.message;
  if (message === 'Query read timeout') return 'CLIENT_QUERY_TIMEOUT';
  if (message === 'timeout expired' || message === 'Connection terminated due to connection timeout')
    return 'CONNECT_TIMEOUT';
  return undefined;
}

function txOf(client: PoolClient, operation: string, timeoutMs: number): Tx {
  return {
    rows: async <R extends QueryResultRow>(text: string, values: readonly unknown[]): Promise<R[]> => {
      try {
        return (
          await client.query<R>({
            text,
            values: values as unknown[],
            types: TYPES,
            query_timeout: timeoutMs,
          } as QueryConfigWithTimeout)
        ).rows;
      } catch (error) {
        throw pgFailure(operation, error);
      }
    },
    exec: async (text: string): Promise<void> => {
      try {
        await client.query({ text, query_timeout: timeoutMs } as QueryConfigWithTimeout);
      } catch (error) {
        throw pgFailure(operation, error);
      }
    },
    processId: (client as PoolClient & { processID: number }).processID,
  };
}

const ignore = (): void => undefined;

async function checkout(pool: Pool, operation: string): Promise<PoolClient> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw pgFailure(operation, error);
  }
  client.on('error', ignore);
  try {
    await checkDurableCommits(client);
  } catch (error) {
    const failure = pgFailure(operation, error);
    client.release(failure);
    throw failure;
  } finally {
    client.removeListener('error', ignore);
  }
  return client;
}

/** pg honours `query_timeout` per query; its types only declare it on the client config. */
type QueryConfigWithTimeout = QueryConfig & { query_timeout: number };

/**
 * Runs `work` in one READ COMMITTED transaction with the SET LOCAL limits. Any failure rolls back;
 * a connection that failed (or whose rollback failed) is destroyed instead of going back to the pool.
 */
export async function inTransaction<T>(
  pool: Pool,
  operation: string,
  work: (tx: Tx) => Promise<T>,
  limits: TransactionLimits = DEFAULT_LIMITS,
): Promise<T> {
  const client = await checkout(pool, operation);
  // A checked-out client has no error listener of the pool's; a dropped socket must not crash the process.
  client.on('error', ignore);
  let broken: Error | undefined;
  const timeoutMs = clientTimeoutMs(limits);
  const control = (text: string): Promise<unknown> =>
    client.query({ text, query_timeout: timeoutMs } as QueryConfigWithTimeout);
  try {
    try {
      const begin = limits === DEFAULT_LIMITS ? BEGIN : beginWith(limits);
      await control(
        raisedCommits.get(client) === true ? `${begin}${TRANSACTION_SQL.setLocalSynchronousCommit}` : begin,
      );
    } catch (error) {
      throw pgFailure(operation, error);
    }
    let result: T;
    try {
      result = await work(txOf(client, operation, timeoutMs));
    } catch (error) {
      const failure = error instanceof PidfenceError ? error : storeFailure('postgres', operation, error);
      if ((failure as PidfenceError).code === 'ERR_PIDFENCE_STORE_UNAVAILABLE') {
        // A lost or silent connection: destroying it makes the server roll back; a ROLLBACK would
        // only wait out another timeout behind the unanswered statement.
        broken = failure;
        throw failure;
      }
      try {
        await control(TRANSACTION_SQL.rollback);
      } catch {
        broken = failure;
      }
      throw failure;
    }
    try {
      await control(TRANSACTION_SQL.commit);
    } catch (error) {
      const failure = pgFailure(operation, error);
      broken = failure;
      // A server-side refusal at COMMIT (e.g. a deferred check) rolled back; a lost socket leaves it unknown.
      throw (failure as PidfenceError).code === 'ERR_PIDFENCE_STORE_UNAVAILABLE'
        ? storeError('ERR_PIDFENCE_STORE_COMMIT_UNKNOWN', operation, 'CONNECTION_LOST')
        : failure;
    }
    return result;
  } finally {
    client.removeListener('error', ignore);
    client.release(broken);
  }
}

/** One statement sent as a named prepared statement (parsed once per connection) or unnamed. */
export interface OneStatement {
  readonly name: string | undefined;
  readonly text: string;
  readonly values: readonly unknown[];
}

/**
 * Sends one statement as its own implicit transaction, in one round trip. A lost connection is
 * handed to `lost`, which says what it means for this kind of statement.
 */
async function sendOne<R extends QueryResultRow>(
  pool: Pool,
  operation: string,
  statement: OneStatement,
  lost: (failure: PidfenceError) => Error,
): Promise<R[]> {
  const client = await checkout(pool, operation);
  client.on('error', ignore);
  let broken: Error | undefined;
  try {
    // The client-side bound applies here too: a silent server must not hold the call forever.
    const config = {
      text: statement.text,
      values: statement.values as unknown[],
      types: TYPES,
      query_timeout: clientTimeoutMs(DEFAULT_LIMITS),
    } as QueryConfigWithTimeout;
    return (await client.query<R>(statement.name === undefined ? config : { ...config, name: statement.name })).rows;
  } catch (error) {
    const failure = pgFailure(operation, error) as PidfenceError;
    if (failure.code !== 'ERR_PIDFENCE_STORE_UNAVAILABLE') throw failure;
    broken = failure;
    throw lost(failure);
  } finally {
    client.removeListener('error', ignore);
    client.release(broken);
  }
}

/**
 * Runs one statement as its own implicit transaction: one round trip that does its work and commits
 * (docs/decisions/0021). A lost connection after the statement was sent may have committed, so it is
 * COMMIT_UNKNOWN; a connection that could not be had is UNAVAILABLE (nothing was sent).
 */
export function inOneStatement<R extends QueryResultRow>(
  pool: Pool,
  operation: string,
  statement: OneStatement,
): Promise<R[]> {
  return sendOne<R>(pool, operation, statement, (failure) =>
    storeError('ERR_PIDFENCE_STORE_COMMIT_UNKNOWN', operation, failure.errno ?? 'CONNECTION_LOST'),
  );
}

/**
 * Runs one read-only statement as its own implicit transaction: one round trip instead of BEGIN,
 * the read and COMMIT (docs/decisions/0024). A read takes no row locks, so the SET LOCAL lock limit
 * has nothing to bound; the client-side timeout still bounds a silent server. A read has nothing to
 * commit, so a lost connection is UNAVAILABLE, never COMMIT_UNKNOWN.
 */
export function readInOneStatement<R extends QueryResultRow>(
  pool: Pool,
  operation: string,
  statement: OneStatement,
): Promise<R[]> {
  return sendOne<R>(pool, operation, statement, (failure) => failure);
}
