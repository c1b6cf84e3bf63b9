// Where the PostgreSQL store's connections come from (ADR-0456 §9): the caller's pg.Pool, left open,
// or a pool made from a connection string, ended by whoever made it. Nothing here starts a timer.
import { Pool } from 'pg';

export type PostgresTarget = Pool | string;

export interface PoolHandle {
  readonly pool: Pool;
  /** Ends the pool if it was made here; a caller's pool is left open. */
  release(): Promise<void>;
}

/** A pool the store owns must not crash the process when an idle connection drops. */
const ignoreIdleError = (): void => undefined;

export function poolFor(target: PostgresTarget, max?: number): PoolHandle {
  if (typeof target !== 'string') return { pool: target, release: async () => undefined };
  const pool = new Pool(max === undefined ? { connectionString: target } : { connectionString: target, max });
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
