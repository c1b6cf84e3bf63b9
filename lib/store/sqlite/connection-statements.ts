// How the SQLite store sets up and checks a connection: the PRAGMA settings it passes to better-sqlite3's
// pragma() (which prefixes PRAGMA), and the first read of a read-only open. The synced commits of
// docs/decisions/0010 (durability.ts) switch the same synchronous setting.

export const CONNECTION_SQL = {
  /** A read that fails when a read-only connection cannot reach the store's shared memory. */
  readSchema: 'SELECT count(*) FROM sqlite_schema',
  journalModeWal: 'journal_mode = WAL',
  foreignKeysOn: 'foreign_keys = ON',
  /** PRAGMA quick_check at open: one row, `ok`, for a sound file. */
  quickCheck: 'quick_check(1)',
  /** The connection's synchronous level, read (as a number: OFF 0, NORMAL 1, FULL 2, EXTRA 3). */
  synchronous: 'synchronous',
} as const;

export function busyTimeoutPragma(ms: number): string {
  return `busy_timeout = ${ms}`;
}

/** `level`: a level's name (NORMAL, FULL) or its number. */
export function synchronousPragma(level: string | number): string {
  return `synchronous = ${level}`;
}
