// The PostgreSQL migration record's statements (design/postgres §D5-D6): its table, the advisory lock two
// migrating owners queue on, and the read and write of applied files. The migrations themselves are the
// numbered files in migrations/.
import { MIGRATIONS_TABLE } from '../migrations';
import { DB_NOW_MS } from './clock-statements';

export const MIGRATION_SQL = {
  createTable: `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
  version        integer NOT NULL PRIMARY KEY,
  name           text    NOT NULL,
  checksum       text    NOT NULL,
  applied_at_ms  bigint  NOT NULL
)`,
  /** Two owners migrating at once: the second waits here, then finds nothing pending. */
  lock: `SELECT pg_advisory_xact_lock(hashtext('${MIGRATIONS_TABLE}'))`,
  selectApplied: `SELECT version, name, checksum FROM ${MIGRATIONS_TABLE} ORDER BY version`,
  recordApplied: `INSERT INTO ${MIGRATIONS_TABLE} (version, name, checksum, applied_at_ms)
  VALUES ($1, $2, $3, ${DB_NOW_MS})`,
} as const;
