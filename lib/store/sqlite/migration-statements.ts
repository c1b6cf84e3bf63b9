// The SQLite migration record's statements (design/architecture §5): its table, and the read and write
// of applied files. The migrations themselves are the numbered files in migrations/.

export const MIGRATION_SQL = {
  createTable: `CREATE TABLE IF NOT EXISTS pidfence_migrations (
  version        INTEGER NOT NULL PRIMARY KEY,
  name           TEXT    NOT NULL,
  checksum       TEXT    NOT NULL,
  applied_at_ms  INTEGER NOT NULL
) STRICT`,
  /** Whether the record exists (readiness of a store opened without migrating). */
  hasTable: "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'pidfence_migrations'",
  selectApplied: 'SELECT version, name, checksum FROM pidfence_migrations ORDER BY version',
  recordApplied: 'INSERT INTO pidfence_migrations (version, name, checksum, applied_at_ms) VALUES (?, ?, ?, ?)',
} as const;
