// Numbered SQL migrations for PostgreSQL, applied by the migration owner (design/postgres §D5-D6; design/architecture §5):
// one transaction under an advisory lock, each file recorded with its sha256 (lib/store/migrations.ts).
import {
  loadMigrations,
  migrationsDirectory,
  pendingMigrations,
  type AppliedMigration,
  type MigrationFile,
} from '../migrations';
import { withPool, type PostgresTarget } from './connection';
import { inTransaction, type Tx } from './transaction';

export const MIGRATIONS_TABLE = 'pidfence_migrations';

const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
  version        integer NOT NULL PRIMARY KEY,
  name           text    NOT NULL,
  checksum       text    NOT NULL,
  applied_at_ms  bigint  NOT NULL
)`;
/** Two owners migrating at once: the second waits here, then finds nothing pending. */
const MIGRATION_LOCK = `SELECT pg_advisory_xact_lock(hashtext('${MIGRATIONS_TABLE}'))`;
const SELECT_APPLIED = `SELECT version, name, checksum FROM ${MIGRATIONS_TABLE} ORDER BY version`;
const RECORD_APPLIED = `INSERT INTO ${MIGRATIONS_TABLE} (version, name, checksum, applied_at_ms)
  VALUES ($1, $2, $3, floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint)`;
/** DDL on a large table may take a while; lock waits stay bounded at the usual second. */
const MIGRATION_LIMITS = { statementTimeout: '120s' } as const;

export function postgresMigrations(): MigrationFile[] {
  return loadMigrations(migrationsDirectory('postgres'));
}

export async function appliedMigrations(tx: Tx): Promise<AppliedMigration[]> {
  return tx.rows<AppliedMigration>(SELECT_APPLIED, []);
}

/**
 * Applies the pending migrations as the connected role (the migration owner) and returns their
 * names. Throws ERR_PIDFENCE_MIGRATION_CHECKSUM when an applied file was changed since.
 */
export async function migratePostgres(target: PostgresTarget): Promise<string[]> {
  const files = postgresMigrations();
  return withPool(target, (pool) =>
    inTransaction(
      pool,
      'migrate',
      async (tx) => {
        await tx.rows(MIGRATION_LOCK, []);
        await tx.exec(CREATE_MIGRATIONS_TABLE);
        const pending = pendingMigrations(await appliedMigrations(tx), files);
        for (const file of pending) {
          await tx.exec(file.sql);
          await tx.rows(RECORD_APPLIED, [file.version, file.name, file.checksum]);
        }
        return pending.map((file) => file.name);
      },
      MIGRATION_LIMITS,
    ),
  );
}
