// `pidfence migrate --db <owner-url|file>`: applies the pending numbered migrations. On PostgreSQL
// run it with the migration owner's URL (the runtime role may not change the schema); a SQLite
// file is created and migrated (docs/decisions/0048).

import { addStoreOptions, oneShotCommand, writeAnswer, type StoreOptions } from '../command';
import { EXIT } from '../exit-codes';
import { resolveStoreTarget, type StoreTarget } from '../store-target';

async function applyMigrations(target: StoreTarget): Promise<readonly string[]> {
  if (target.kind === 'postgres') {
    const { migratePostgres } = await import('../../store/postgres/index');
    return migratePostgres(target.url);
  }
  // The database alone, not the store (which migrates on open), so the answer lists what this command applied.
  const { checkSqliteReadiness, migrateSqliteDatabase, openSqliteDatabase } = await import('../../store/sqlite/index');
  const database = openSqliteDatabase(target.file, { create: true });
  try {
    const applied = migrateSqliteDatabase(database);
    checkSqliteReadiness(database);
    return applied;
  } finally {
    database.close();
  }
}

export const migrateCommand = oneShotCommand<StoreOptions>(
  'migrate',
  "apply the pending schema migrations (PostgreSQL: with the migration owner's URL)",
  (command) => addStoreOptions(command),
  async (io, _arguments, options) => {
    const target = resolveStoreTarget(options.db, io.env);
    const applied = await applyMigrations(target);
    writeAnswer(io, options.json, { applied }, () =>
      applied.length === 0
        ? 'the schema is up to date; nothing to apply\n'
        : `applied ${applied.length} migration(s): ${applied.join(', ')}\n`,
    );
    return EXIT.ok;
  },
);
