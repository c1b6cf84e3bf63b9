// How a store reports its own failure (design/architecture §6: exceptions for bugs and broken databases only):
// one PidfenceError code, the driver's error code as `errno`, never a value from the command.
import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';

export function storeFailure(store: 'sqlite' | 'postgres', operation: string, error: unknown): Error {
  if (error instanceof PidfenceError || error instanceof PidfenceTypeError || error instanceof PidfenceRangeError) return error;
  const driverCode = typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string'
    ? (error as { code: string }).code
    : 'UNKNOWN';
  return new PidfenceError(
    `the ${store} store failed during ${operation} (${driverCode}); the transaction was rolled back and nothing was written. Check the database (disk, schema, locks) and retry.`,
    'ERR_PIDFENCE_STORE_FAILED',
    { errno: driverCode, cause: error },
  );
}
