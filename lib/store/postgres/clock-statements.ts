// The PostgreSQL store's clock (design/postgres §D3): transaction_timestamp() is the only time any
// statement reads or writes; every statements file of this store builds its times from DB_NOW_MS.

/**
 * Database time in epoch ms. transaction_timestamp() is fixed for the whole transaction, so every
 * statement of one transaction sees the same instant; the JS side only ever reads it back.
 */
export const DB_NOW_MS = 'floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint';

export const CLOCK_SQL = {
  /** The transaction's clock, for the transactions that take no run lock first. */
  now: `SELECT ${DB_NOW_MS} AS "nowMs"`,
} as const;
