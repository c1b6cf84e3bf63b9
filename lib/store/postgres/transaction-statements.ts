// The PostgreSQL store's transaction control (design/architecture §7; docs/decisions/0010, 0045): BEGIN with
// its SET LOCAL limits, COMMIT and ROLLBACK, and the durable-commit check each connection runs once.

/** BEGIN with the limits every pidfence transaction runs under (each a PostgreSQL duration text). */
export function beginSql(statementTimeout: string, lockTimeout: string, idleInTransactionTimeout: string): string {
  return (
    `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = '${statementTimeout}'; ` +
    `SET LOCAL lock_timeout = '${lockTimeout}'; SET LOCAL idle_in_transaction_session_timeout = '${idleInTransactionTimeout}'`
  );
}

export const TRANSACTION_SQL = {
  /**
   * Raises a server, database or role default of synchronous_commit = off to `on` for this session; a
   * choice the connection made itself (startup options, a SET) is kept. A row back means it was raised.
   */
  raiseSynchronousCommit: `SELECT set_config('synchronous_commit', 'on', false) AS raised FROM pg_settings
  WHERE name = 'synchronous_commit' AND setting = 'off' AND source NOT IN ('client', 'session')`,
  /** Appended to BEGIN on a connection whose default was raised, should a pooler reset the session. */
  setLocalSynchronousCommit: '; SET LOCAL synchronous_commit = on',
  commit: 'COMMIT',
  rollback: 'ROLLBACK',
} as const;
