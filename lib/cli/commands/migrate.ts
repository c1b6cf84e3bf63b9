// `pidfence migrate --db <owner-url|file>`: applies the pending numbered migrations. On PostgreSQL
// run it with the migration owner's URL (the runtime role may not change the schema); a SQLite
// file is created and migrated (docs/decisions/0048).
import type { Command } from 'commander';

import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
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

export const migrateCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addStoreOptions(program.command('migrate'))
      .description('apply the pending schema migrations (PostgreSQL: with the migration owner\'s URL)')
      .action(async (options: StoreOptions) => {
        const target = resolveStoreTarget(options.db, io.env);
        const applied = await applyMigrations(target);
        if (options.json === true) writeJson(io, { applied });
        else io.stdout.write(applied.length === 0 ? 'the schema is up to date; nothing to apply\n' : `applied ${applied.length} migration(s): ${applied.join(', ')}\n`);
        done(EXIT.ok);
      });
  },
};
