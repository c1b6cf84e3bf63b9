// A PostgreSQL clock that only tests install. The store's SQL reads time from an unqualified
// transaction_timestamp() (lib/store/postgres/clock-statements.ts DB_NOW_MS). This helper creates, in
// one throw-away test database, a schema holding a function of that name which adds an offset kept
// in a one-row table, and hands out a runtime URL whose search_path is `public, <clock schema>,
// pg_catalog`: public stays current_schema() (where the store's tables and readiness check live)
// and holds no such function, and the clock schema comes BEFORE pg_catalog (pg_catalog is searched
// first only when search_path does not name it). Nothing in lib/ knows of it: a production
// connection never has this schema or this search_path.
import type { Pool } from 'pg';

import type { ProvisionedDatabase } from './postgres';
import { runtimeUrlNamed } from './pg-store';

export const TEST_CLOCK_SCHEMA = 'pidfence_test_clock';

export interface PostgresTestClock {
  /** A runtime-role URL whose sessions read the moved clock (also in child processes). */
  readonly url: string;
  /** Moves the clock of every session on `url` forward by `ms`. */
  advance(ms: number): Promise<void>;
  /** The offset now in force, in ms (read back from the database). */
  offsetMs(): Promise<number>;
}

/** Installs the test clock with `admin` (a superuser pool on `database`); offset starts at 0. */
export async function installPostgresTestClock(
  admin: Pool,
  database: ProvisionedDatabase,
  applicationName: string,
): Promise<PostgresTestClock> {
  const schema = TEST_CLOCK_SCHEMA;
  const runtime = `"${database.runtimeRole.replace(/"/g, '""')}"`;
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.query(
    `CREATE TABLE ${schema}.offset_ms (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), ms bigint NOT NULL)`,
  );
  await admin.query(`INSERT INTO ${schema}.offset_ms (ms) VALUES (0)`);
  await admin.query(`CREATE FUNCTION ${schema}.transaction_timestamp() RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT pg_catalog.transaction_timestamp() + (SELECT ms FROM ${schema}.offset_ms) * interval '1 millisecond'
  $$`);
  await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${runtime}`);
  await admin.query(`GRANT SELECT ON ${schema}.offset_ms TO ${runtime}`);
  await admin.query(`GRANT EXECUTE ON FUNCTION ${schema}.transaction_timestamp() TO ${runtime}`);
  const url = runtimeUrlNamed(database, applicationName, { search_path: `public,${schema},pg_catalog` });
  return {
    url,
    advance: async (ms) => {
      await admin.query(`UPDATE ${schema}.offset_ms SET ms = ms + $1`, [Math.round(ms)]);
    },
    offsetMs: async () =>
      Number((await admin.query<{ ms: string }>(`SELECT ms FROM ${schema}.offset_ms`)).rows[0]?.ms ?? 0),
  };
}
