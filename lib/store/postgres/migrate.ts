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
import { MIGRATION_SQL } from './migration-statements';
import { inTransaction, type Tx } from './transaction';

export { MIGRATIONS_TABLE } from '../migrations';

/** DDL on a large table may take a while; lock waits stay bounded at the usual second. */
const MIGRATION_LIMITS = { statementTimeout: '120s' } as const;

export function postgresMigrations(): MigrationFile[] {
  return loadMigrations(migrationsDirectory('postgres'));
}

export async function appliedMigrations(tx: Tx): Promise<AppliedMigration[]> {
  return tx.rows<AppliedMigration>(MIGRATION_SQL.selectApplied, []);
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
        await tx.rows(MIGRATION_SQL.lock, []);
        await tx.exec(MIGRATION_SQL.createTable);
        const pending = pendingMigrations(await appliedMigrations(tx), files);
        for (const file of pending) {
          await tx.exec(file.sql);
          await tx.rows(MIGRATION_SQL.recordApplied, [file.version, file.name, file.checksum]);
        }
        return pending.map((file) => file.name);
      },
      MIGRATION_LIMITS,
    ),
  );
}
