// Small pools and one-value queries for tests that look at PostgreSQL from the side.
import { Pool, type PoolConfig } from 'pg';

/** A pool whose idle-client errors (a server stopped by the test) are expected, not fatal. */
export function silentPool(connectionString: string, options: Omit<PoolConfig, 'connectionString'> = {}): Pool {
  const pool = new Pool({ connectionString, max: 2, ...options });
  pool.on('error', () => undefined);
  return pool;
}

/** The first column of the first row. */
export async function scalar<T>(queryable: Pick<Pool, 'query'>, sql: string, params: unknown[] = []): Promise<T> {
  const row = (await queryable.query(sql, params)).rows[0] as Record<string, T> | undefined;
  if (row === undefined) throw new Error(`no row from ${sql}`);
  return Object.values(row)[0] as T;
}
