// How a store reports its own failure (design/architecture §6: exceptions for bugs and broken databases only):
// one PidfenceError code, the driver's error code as `errno`, never a value from the command.
import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';

export function storeFailure(store: 'sqlite' | 'postgres', operation: string, error: unknown): Error {
  if (error instanceof PidfenceError || error instanceof PidfenceTypeError || error instanceof PidfenceRangeError)
    return error;
  const driverCode =
    typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string'
      ? (error as { code: string }).code
      : 'UNKNOWN';
  return new PidfenceError(
    `the ${store} store failed during ${operation} (${driverCode}); the transaction was rolled back and nothing was written. Check the database (disk, schema, locks) and retry.`,
    'ERR_PIDFENCE_STORE_FAILED',
    { errno: driverCode, cause: error },
  );
}

/**
 * A rule the store's own transaction guarantees did not hold: a CAS that its lock makes impossible
 * lost, a row it just read is gone, the database answered an outcome that does not exist. Never a
 * driver failure, never bad input: the database was changed outside pidfence, or pidfence has a bug.
 * The rule names columns and outcomes only, never a value.
 */
export function storeInvariant(store: 'sqlite' | 'postgres', operation: string, rule: string): PidfenceError {
  return new PidfenceError(
    `the ${store} store found its own rule broken during ${operation}: ${rule}. The database was changed outside pidfence or this is a pidfence bug; report it with this message.`,
    'ERR_PIDFENCE_STORE_INVARIANT',
  );
}
