// What a PostgreSQL connection string must look like before a pool is made of it (docs/decisions/0225):
// pg reads it as a URL, so one that is not a URL is the caller's mistake, never "the server is down".
// Loads no `pg`, so the CLI can check `--db` before loading any PostgreSQL code. No sentence here
// repeats the string: it may hold a password.
import { PidfenceRangeError } from '../../base/errors';

/** The URL schemes of a PostgreSQL store. */
export const POSTGRES_URL = /^postgres(ql)?:\/\//i;

/** Throws ERR_PIDFENCE_INVALID_DATABASE_URL unless a postgres:// string parses as a URL (a port from 1 to 65535 included). */
export function validatePostgresUrl(connectionString: string): string {
  if (!POSTGRES_URL.test(connectionString)) return connectionString;
  let port: string;
  try {
    port = new URL(connectionString).port;
  } catch {
    port = 'malformed';
  }
  if (port === '0' || port === 'malformed') {
    throw new PidfenceRangeError(
      'the PostgreSQL URL is malformed: write it as postgres://user:password@host:port/database, with a port from 1 to 65535 and special characters of the password percent-encoded (%40 for @).',
      'ERR_PIDFENCE_INVALID_DATABASE_URL',
    );
  }
  return connectionString;
}
