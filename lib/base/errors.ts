// The project's error classes. Every thrown error carries a stable `code` and a message that
// says what to do; outcomes that are expected (exited, mismatch, stale fence) are values, not errors.

export interface PidfenceErrorOptions {
  /** The errno name for a failed syscall, e.g. `EPERM`. Never a path, PID or command. */
  readonly errno?: string;
  /** The underlying failure, kept for a debugger or a log; the CLI never prints it. */
  readonly cause?: unknown;
}

/** An expected failure the caller can act on (unavailable addon, failed syscall, database down). */
export class PidfenceError extends Error {
  readonly code: string;
  readonly errno: string | undefined;

  constructor(message: string, code: string, options: PidfenceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PidfenceError';
    this.code = code;
    this.errno = options.errno;
  }
}

/** A value of the wrong type reached a pidfence API. */
export class PidfenceTypeError extends TypeError {
  readonly code: string;

  constructor(message: string, code: string) {
    super(message);
    this.name = 'PidfenceTypeError';
    this.code = code;
  }
}

/** A value of the right type but outside the documented range reached a pidfence API. */
export class PidfenceRangeError extends RangeError {
  readonly code: string;

  constructor(message: string, code: string) {
    super(message);
    this.name = 'PidfenceRangeError';
    this.code = code;
  }
}

export type PidfenceInputError = PidfenceTypeError | PidfenceRangeError;

export function isPidfenceInputError(error: unknown): error is PidfenceInputError {
  return error instanceof PidfenceTypeError || error instanceof PidfenceRangeError;
}

/** The disk under a store is full (docs/decisions/0191): the one code for it, in every store and at the CLI. */
export const STORE_FULL_CODE = 'ERR_PIDFENCE_STORE_FULL';

/** True for the store-full error: a condition that passes once space returns, never a reason to give up. */
export function isStoreFull(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === STORE_FULL_CODE;
}
