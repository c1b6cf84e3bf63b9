// Field validators shared by every command of the contract (design/postgres §D2): exact shapes, typed
// errors with stable codes, and messages that say what to pass, never echoing a secret value.
import { isPidfenceInputError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { TOKEN_PATTERN } from '../base/limits';
import { isPlainObject, shapeProblem } from '../base/shape';
import { isDispatchResult, type DispatchResult } from './classification';
import {
  COUNTER_MAX,
  EPOCH_MS_MAX,
  ID_MAX_LENGTH,
  LEASE_DURATION_MAX_MS,
  LEASE_DURATION_MIN_MS,
  OWNER_MAX_LENGTH,
  RETRY_DELAY_MAX_MS,
  RETRY_DELAY_MIN_MS,
  TOKEN_LENGTH,
} from './limits';

/** The id rule (run, attempt, project, session ids); the HTTP surface's schemas use this very pattern (json-schemas.ts). */
export const ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,${ID_MAX_LENGTH - 1}}$`);
const OWNER_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,${OWNER_MAX_LENGTH - 1}}$`);
const DIGEST_PATTERN = /^[0-9a-f]{64}$/;

/** Rejects anything but a plain object whose keys are all in `required` or `optional`. */
export function validateExactShape(
  value: unknown,
  what: string,
  required: readonly string[],
  optional: readonly string[] = [],
): Record<string, unknown> {
  const code = 'ERR_PIDFENCE_INVALID_COMMAND';
  const problem = shapeProblem(value, required, optional);
  if (problem === null) return value as Record<string, unknown>;
  switch (problem.kind) {
    case 'not_object':
      throw new PidfenceTypeError(`${what} must be a plain object with ${required.join(', ')}.`, code);
    case 'unknown_key':
      throw new PidfenceTypeError(
        `${what} has an unknown key "${problem.key.slice(0, 32)}"; pass only ${[...required, ...optional].join(', ')}.`,
        code,
      );
    case 'missing_key':
      throw new PidfenceTypeError(`${what} is missing ${problem.key}.`, code);
  }
}

function validateString(value: unknown, what: string, pattern: RegExp, rule: string, code: string): string {
  if (typeof value !== 'string') throw new PidfenceTypeError(`${what} must be a string (${rule}).`, code);
  if (!pattern.test(value)) throw new PidfenceRangeError(`${what} must be ${rule}.`, code);
  return value;
}

function validateInteger(value: unknown, what: string, min: number, max: number, code: string): number {
  if (typeof value !== 'number')
    throw new PidfenceTypeError(`${what} must be a number (an integer from ${min} to ${max}).`, code);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new PidfenceRangeError(`${what} must be an integer from ${min} to ${max}.`, code);
  }
  return value;
}

export function validateId(value: unknown, what: string): string {
  return validateString(
    value,
    what,
    ID_PATTERN,
    `1 to ${ID_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : - starting with a letter or digit`,
    'ERR_PIDFENCE_INVALID_ID',
  );
}

export function validateOwner(value: unknown): string {
  return validateString(
    value,
    'owner',
    OWNER_PATTERN,
    `1 to ${OWNER_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : @ / - starting with a letter or digit`,
    'ERR_PIDFENCE_INVALID_OWNER',
  );
}

/** The raw token is never echoed: the message only says what a token looks like. */
export function validateToken(value: unknown): string {
  return validateString(
    value,
    'token',
    TOKEN_PATTERN,
    `the ${TOKEN_LENGTH}-character base64url value from createLeaseToken() or a successful claim`,
    'ERR_PIDFENCE_INVALID_TOKEN',
  );
}

export function validateDigest(value: unknown, what: string): string {
  return validateString(
    value,
    what,
    DIGEST_PATTERN,
    '64 lowercase hexadecimal characters (a SHA-256 digest)',
    'ERR_PIDFENCE_INVALID_DIGEST',
  );
}

export function validateEpochMs(value: unknown, what: string): number {
  return validateInteger(value, what, 0, EPOCH_MS_MAX, 'ERR_PIDFENCE_INVALID_TIMESTAMP');
}

export function validateCounter(value: unknown, what: string): number {
  return validateInteger(value, what, 0, COUNTER_MAX, 'ERR_PIDFENCE_INVALID_COUNTER');
}

export function validateLeaseDurationMs(value: unknown): number {
  return validateInteger(
    value,
    'leaseDurationMs',
    LEASE_DURATION_MIN_MS,
    LEASE_DURATION_MAX_MS,
    'ERR_PIDFENCE_INVALID_LEASE_DURATION',
  );
}

export function validateRetryDelayMs(value: unknown): number {
  return validateInteger(
    value,
    'retryDelayMs',
    RETRY_DELAY_MIN_MS,
    RETRY_DELAY_MAX_MS,
    'ERR_PIDFENCE_INVALID_RETRY_DELAY',
  );
}

export function validateBoundedInteger(value: unknown, what: string, min: number, max: number, code: string): number {
  return validateInteger(value, what, min, max, code);
}

export function validateDispatchResult(value: unknown): DispatchResult {
  if (!isDispatchResult(value)) {
    throw new PidfenceTypeError(
      'result must be one of the design/dispatch §2.4 results (termination_requested, already_exited, identity_mismatch, ...).',
      'ERR_PIDFENCE_INVALID_RESULT',
    );
  }
  return value;
}

/** Checks one column of a stored row; `field` names it in the error. */
export type FieldCheck<T> = (value: unknown, field: string) => T;
/** One check per field of a record: the field list is the exact column set of the row. */
export type RecordSpec<R> = { readonly [K in keyof R]-?: FieldCheck<R[K]> };

/** A NULL column or `check(value)`. */
export function nullableField<T>(check: FieldCheck<T>): FieldCheck<T | null> {
  return (value, field) => (value === null ? null : check(value, field));
}

/** One of `allowed`; anything else breaks the record. */
export function enumField<T extends string>(allowed: readonly T[]): FieldCheck<T> {
  return (value, field) => validateEnum(value, field, allowed, 'ERR_PIDFENCE_INVALID_RECORD');
}

/**
 * The validator of a record read back from a store (design/architecture §6: corruption fails closed):
 * a plain object with exactly the spec's fields, every one present (a store maps each column; an
 * absent nullable is spelt null), each checked, then the record's own rules. Whatever is wrong is
 * ERR_PIDFENCE_INVALID_RECORD: a bad stored value is the store's fault, never the caller's input.
 */
export function storedRecordValidator<R>(
  what: string,
  spec: RecordSpec<R>,
  rules: (record: R, broken: (holds: boolean, rule: string) => void) => void,
): (value: unknown) => R {
  const fields = Object.entries(spec) as Array<[string, FieldCheck<unknown>]>;
  const keys = fields.map(([key]) => key);
  const broken = (holds: boolean, rule: string): void => {
    if (!holds) throw storedRecordError(what, rule);
  };
  const shapeBroken = (value: unknown): never => {
    const problem = shapeProblem(value, keys);
    throw storedRecordError(
      what,
      problem === null || problem.kind === 'not_object'
        ? 'it is not a plain object'
        : `${problem.kind === 'unknown_key' ? 'unknown' : 'missing'} field ${problem.key.slice(0, 32)}`,
    );
  };
  return (value) => {
    // As many own keys as fields, and no field undefined below: exactly the fields (the cheap form of shapeProblem).
    if (!isPlainObject(value) || Object.keys(value).length !== keys.length) shapeBroken(value);
    const row = value as Record<string, unknown>;
    const record: Record<string, unknown> = {};
    try {
      for (const [key, check] of fields) {
        const column = row[key];
        if (column === undefined) shapeBroken(value);
        record[key] = check(column, key);
      }
    } catch (error) {
      if (isPidfenceInputError(error) && error.code !== 'ERR_PIDFENCE_INVALID_RECORD')
        throw storedRecordError(what, error.message.replace(/\.$/, ''));
      throw error;
    }
    rules(record as R, broken);
    return record as R;
  };
}

function storedRecordError(what: string, detail: string): PidfenceRangeError {
  return new PidfenceRangeError(
    `${what} breaks the state invariant: ${detail}. The store is corrupt or was written outside pidfence.`,
    'ERR_PIDFENCE_INVALID_RECORD',
  );
}

/**
 * A page of commands, one per run, written in one transaction (docs/decisions/0370, 0431): an array
 * of 1 to `max` commands, each valid on its own, each run named once. `page` names the page in its
 * errors ("cancel intent"), `per` says what one command stands for ("one per run to stop").
 */
export function validateRunPage<T extends { readonly runId: string }>(
  value: unknown,
  words: { readonly page: string; readonly command: string; readonly per: string },
  max: number,
  validateOne: (item: unknown) => T,
): T[] {
  if (!Array.isArray(value))
    throw new PidfenceRangeError(
      `${words.page}s must be an array of ${words.command}s; pass ${words.per}.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  validateBoundedInteger(value.length, `${words.page} page size`, 1, max, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  const commands = (value as unknown[]).map(validateOne);
  if (new Set(commands.map((command) => command.runId)).size !== commands.length)
    throw new PidfenceRangeError(
      `this ${words.page} page names a run twice; name each run once per page.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  return commands;
}

export function validateEnum<T extends string>(value: unknown, what: string, allowed: readonly T[], code: string): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new PidfenceTypeError(`${what} must be one of ${allowed.join(', ')}.`, code);
  }
  return value as T;
}
