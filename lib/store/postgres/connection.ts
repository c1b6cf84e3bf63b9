// Where the PostgreSQL store's connections come from (design/postgres §D9): the caller's pg.Pool, left open,
// or a pool made from a connection string, ended by whoever made it. Nothing here starts a timer.
// A pool made here waits a bounded time for everything (docs/decisions/0045): connecting, each
// answer (transaction.ts), and a dead peer found by TCP keepalive.
import { Pool, type PoolConfig } from 'pg';

import { validatePostgresUrl } from './connection-string';
import { IDLE_IN_TRANSACTION_TIMEOUT_MS, STATEMENT_TIMEOUT_MS } from './transaction';

export type PostgresTarget = Pool | string;

export interface PoolHandle {
  readonly pool: Pool;
  /** Ends the pool if it was made here; a caller's pool is left open. */
  release(): Promise<void>;
}

/** Without connect_timeout in the URL or PGCONNECT_TIMEOUT, a connection attempt gives up after this. */
export const CONNECT_TIMEOUT_DEFAULT_MS = 5_000;
/** libpq's floor: a connect_timeout below 2 s is read as 2 s. */
const CONNECT_TIMEOUT_MIN_MS = 2_000;
const KEEPALIVE_IDLE_MS = 10_000;

function positiveSeconds(text: string | null | undefined): number | undefined {
  if (text === null || text === undefined || !/^\d{1,6}$/.test(text.trim())) return undefined;
  const seconds = Number(text);
  return seconds > 0 ? seconds : undefined;
}

function urlParameter(connectionString: string, name: string): string | null {
  try {
    return new URL(connectionString).searchParams.get(name);
  } catch {
    return null;
  }
}

/**
 * The connect timeout as libpq reads it: `connect_timeout` (seconds) in the URL, else
 * PGCONNECT_TIMEOUT, at least 2 s. Zero means "wait forever" to libpq; pidfence never waits
 * forever, so zero and garbage fall back to the default.
 */
export function connectTimeoutMs(connectionString: string, env: NodeJS.ProcessEnv = process.env): number {
  const seconds =
    positiveSeconds(urlParameter(connectionString, 'connect_timeout')) ?? positiveSeconds(env.PGCONNECT_TIMEOUT);
  return seconds === undefined ? CONNECT_TIMEOUT_DEFAULT_MS : Math.max(CONNECT_TIMEOUT_MIN_MS, seconds * 1_000);
}

export function poolConfigFor(connectionString: string, max?: number): PoolConfig {
  return {
    connectionString,
    ...(max === undefined ? {} : { max }),
    connectionTimeoutMillis: connectTimeoutMs(connectionString),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    // Session defaults for any statement outside inTransaction's SET LOCAL limits.
    statement_timeout: STATEMENT_TIMEOUT_MS,
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
  };
}

/** A pool the store owns must not crash the process when an idle connection drops. */
const ignoreIdleError = (): void => undefined;

export function poolFor(target: PostgresTarget, max?: number): PoolHandle {
  if (typeof target !== 'string') return { pool: target, release: async () => undefined };
  const pool = new Pool(poolConfigFor(validatePostgresUrl(target), max));
  pool.on('error', ignoreIdleError);
  return { pool, release: () => pool.end() };
}

export async function withPool<T>(target: PostgresTarget, use: (pool: Pool) => Promise<T>): Promise<T> {
  const handle = poolFor(target, 1);
  try {
    return await use(handle.pool);
  } finally {
    await handle.release();
  }
}
