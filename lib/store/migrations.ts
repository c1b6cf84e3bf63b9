// Numbered SQL migrations with recorded checksums, shared by both stores (design/architecture §5, design/postgres §D6):
// list the files, hash them, compare with what a database recorded, and fail readiness on drift.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { PidfenceError } from '../base/errors';

export interface MigrationFile {
  readonly version: number;
  /** The file name without `.sql`, e.g. `0001_runs_attempts_events`. */
  readonly name: string;
  readonly sql: string;
  /** sha256 of the file's bytes, lowercase hex. */
  readonly checksum: string;
}

export interface AppliedMigration {
  readonly version: number;
  readonly name: string;
  readonly checksum: string;
}

/** The table each store records its applied migrations in (one row per file, with its checksum). */
export const MIGRATIONS_TABLE = 'pidfence_migrations';

const MIGRATION_FILE = /^(\d{4})_[a-z0-9_]+\.sql$/;

/** The package root: SQL files ship beside dist/, read at runtime (package.json `files`). */
export function packageRoot(): string {
  // dist/lib/store → package root; lib/store (ts-node style) resolves the same way one level up.
  const fromDist = path.resolve(__dirname, '../../..');
  return path.basename(path.dirname(path.dirname(__dirname))) === 'dist' ? fromDist : path.resolve(__dirname, '../..');
}

export function migrationsDirectory(store: 'sqlite' | 'postgres'): string {
  return path.join(packageRoot(), 'lib', 'store', store, 'migrations');
}

/** Reads `NNNN_name.sql` files in order; numbering must start at 1 and have no gaps. */
export function loadMigrations(directory: string): MigrationFile[] {
  const files = readdirSync(directory)
    .filter((name) => name.endsWith('.sql'))
    .sort();
  return files.map((file, index) => {
    const match = MIGRATION_FILE.exec(file);
    const version = match ? Number(match[1]) : Number.NaN;
    if (version !== index + 1) {
      throw new PidfenceError(
        `migration file ${file} breaks the numbering: files must be NNNN_lowercase_name.sql numbered 0001, 0002, ... without gaps.`,
        'ERR_PIDFENCE_MIGRATION_LAYOUT',
      );
    }
    const bytes = readFileSync(path.join(directory, file));
    return {
      version,
      name: file.slice(0, -'.sql'.length),
      sql: bytes.toString('utf8'),
      checksum: createHash('sha256').update(bytes).digest('hex'),
    };
  });
}

/**
 * The readiness rule: every applied migration must still exist with the same name and checksum.
 * Returns the files not applied yet; throws when the database and the package disagree.
 */
export function pendingMigrations(
  applied: readonly AppliedMigration[],
  files: readonly MigrationFile[],
): MigrationFile[] {
  for (const done of applied) {
    const file = files[done.version - 1];
    if (file === undefined) {
      throw new PidfenceError(
        `the database has migration ${done.name}, which this pidfence version does not know: it was migrated by a newer release. Upgrade pidfence or restore a matching backup.`,
        'ERR_PIDFENCE_MIGRATION_UNKNOWN',
      );
    }
    if (file.name !== done.name || file.checksum !== done.checksum) {
      throw new PidfenceError(
        `migration ${done.name} was changed after it was applied (recorded sha256 ${done.checksum.slice(0, 12)}…, file ${file.name} sha256 ${file.checksum.slice(0, 12)}…). Restore the original file; put schema changes in a new numbered migration.`,
        'ERR_PIDFENCE_MIGRATION_CHECKSUM',
      );
    }
  }
  return files.slice(applied.length);
}
