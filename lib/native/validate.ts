// Argument validation for lib/native: every value is checked here, once, before any native
// call, with a typed error carrying a stable code. Nothing malformed reaches the kernel.
import { constants as osConstants } from 'node:os';

import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { PID_MAX } from '../base/limits';

/** PID_MAX_LIMIT on 64-bit Linux: no PID can be larger (one definition, lib/base/limits.ts). */
export { PID_MAX };
/** start ticks and pidfs inodes are unsigned 64-bit: at most 20 decimal digits. */
export const U64_DECIMAL_MAX_DIGITS = 20;
const U64_MAX = 18_446_744_073_709_551_615n;
/** setTimeout's own ceiling; a longer wait is a configuration error. */
export const WAIT_EXIT_MAX_MS = 2_147_483_647;

const UUID_LOWER = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DECIMAL_U64_SHAPE = /^(0|[1-9][0-9]{0,19})$/;
const U64_MAX_TEXT_LENGTH = 20;

export interface ExpectedIdentity {
  readonly pid: number;
  readonly bootId: string;
  readonly startTicks: string;
  /** pidfs inode (Linux 6.9+): when present it is compared, and it is the stronger proof. */
  readonly pidfsIno?: string;
  /** Accepted so that captureIdentity's result can be passed back as is (not a proof by itself). */
  readonly pgid?: number;
}

const EXPECTED_KEYS = new Set(['pid', 'bootId', 'startTicks', 'pidfsIno', 'pgid']);

export function validatePid(value: unknown, what = 'pid'): number {
  if (typeof value !== 'number') {
    throw new PidfenceTypeError(
      `${what} must be a number (an integer from 1 to ${PID_MAX}).`,
      'ERR_PIDFENCE_INVALID_PID',
    );
  }
  if (!Number.isInteger(value) || value < 1 || value > PID_MAX) {
    throw new PidfenceRangeError(`${what} must be an integer from 1 to ${PID_MAX}.`, 'ERR_PIDFENCE_INVALID_PID');
  }
  return value;
}

export function validateBootId(value: unknown): string {
  if (typeof value !== 'string') {
    throw new PidfenceTypeError(
      'bootId must be a string: the lowercase UUID from captureIdentity().',
      'ERR_PIDFENCE_INVALID_BOOT_ID',
    );
  }
  if (!UUID_LOWER.test(value)) {
    throw new PidfenceRangeError(
      'bootId must be a lowercase UUID (36 characters), as captureIdentity() returns it.',
      'ERR_PIDFENCE_INVALID_BOOT_ID',
    );
  }
  return value;
}

function validateU64Decimal(value: unknown, what: string, code: string): string {
  if (typeof value !== 'string') {
    throw new PidfenceTypeError(`${what} must be a decimal string (kept exact, never a float).`, code);
  }
  // BigInt only for 20-digit values: shorter ones cannot exceed 2^64-1 (this runs per signal).
  if (!DECIMAL_U64_SHAPE.test(value) || (value.length === U64_MAX_TEXT_LENGTH && BigInt(value) > U64_MAX)) {
    throw new PidfenceRangeError(
      `${what} must be a decimal string of at most ${U64_DECIMAL_MAX_DIGITS} digits without leading zeros.`,
      code,
    );
  }
  return value;
}

export function validateStartTicks(value: unknown): string {
  return validateU64Decimal(value, 'startTicks', 'ERR_PIDFENCE_INVALID_START_TICKS');
}

export function validatePidfsIno(value: unknown): string {
  return validateU64Decimal(value, 'pidfsIno', 'ERR_PIDFENCE_INVALID_PIDFS_INO');
}

/** A PID namespace's inode (docs/decisions/0155). */
export function validatePidNamespace(value: unknown): string {
  return validateU64Decimal(value, 'pidNs', 'ERR_PIDFENCE_INVALID_PID_NAMESPACE');
}

/** A cgroup v2 id: its directory's inode, the kernel's PIDFD_GET_INFO cgroupid (docs/decisions/0180). */
export function validateCgroupId(value: unknown): string {
  return validateU64Decimal(value, 'cgroupId', 'ERR_PIDFENCE_INVALID_CGROUP_ID');
}

// A frozen identity cannot change after it was checked, so it is checked once: callers that
// signal the same identity repeatedly (the controller, a supervisor) skip the re-validation.
const validatedFrozen = new WeakMap<object, ExpectedIdentity>();

export function validateExpectedIdentity(value: unknown): ExpectedIdentity {
  if (typeof value === 'object' && value !== null && Object.isFrozen(value)) {
    const cached = validatedFrozen.get(value);
    if (cached !== undefined) return cached;
    const checked = validateExpectedIdentityFresh(value);
    validatedFrozen.set(value, checked);
    return checked;
  }
  return validateExpectedIdentityFresh(value);
}

function validateExpectedIdentityFresh(value: unknown): ExpectedIdentity {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PidfenceTypeError(
      'expected must be an identity object as captureIdentity() returns it.',
      'ERR_PIDFENCE_INVALID_IDENTITY',
    );
  }
  for (const key in value) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    if (!EXPECTED_KEYS.has(key)) {
      throw new PidfenceTypeError(
        `expected has an unknown key "${key.slice(0, 32)}"; pass only pid, bootId, startTicks, pidfsIno, pgid.`,
        'ERR_PIDFENCE_INVALID_IDENTITY',
      );
    }
  }
  const record = value as Record<string, unknown>;
  const pid = validatePid(record.pid);
  const identity: { -readonly [K in keyof ExpectedIdentity]: ExpectedIdentity[K] } = {
    pid,
    bootId: validateBootId(record.bootId),
    startTicks: validateStartTicks(record.startTicks),
  };
  if (record.pidfsIno !== undefined) identity.pidfsIno = validatePidfsIno(record.pidfsIno);
  if (record.pgid !== undefined) identity.pgid = validatePid(record.pgid, 'pgid');
  return identity;
}

const signalNumbers = osConstants.signals as Record<string, number>;

/** A signal name (`SIGTERM`), its number, or 0 (a pure proof: nothing is delivered). */
export function validateSignal(value: unknown): number {
  if (typeof value === 'string') {
    const number = Object.prototype.hasOwnProperty.call(signalNumbers, value) ? signalNumbers[value] : undefined;
    if (number === undefined) {
      throw new PidfenceRangeError(
        'signal must be a known signal name such as "SIGTERM", or its number.',
        'ERR_PIDFENCE_INVALID_SIGNAL',
      );
    }
    return number;
  }
  if (typeof value !== 'number') {
    throw new PidfenceTypeError(
      'signal must be a signal name such as "SIGTERM" or a signal number.',
      'ERR_PIDFENCE_INVALID_SIGNAL',
    );
  }
  if (value !== 0 && !Object.values(signalNumbers).includes(value)) {
    throw new PidfenceRangeError('signal must be 0 or a known signal number.', 'ERR_PIDFENCE_INVALID_SIGNAL');
  }
  return value;
}

export interface SignalOptions {
  /** Signal the whole process group led by the process (it must be the leader). */
  readonly group?: boolean;
  /** Use the `pgid-after-pidfd-check` path even where the kernel has the group flag (tests). */
  readonly forceGroupFallback?: boolean;
}

const SIGNAL_OPTION_KEYS = new Set(['group', 'forceGroupFallback']);

export function validateSignalOptions(value: unknown): Required<SignalOptions> {
  if (value === undefined) return { group: false, forceGroupFallback: false };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PidfenceTypeError('options must be an object such as { group: true }.', 'ERR_PIDFENCE_INVALID_OPTIONS');
  }
  for (const key in value) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    const option = (value as Record<string, unknown>)[key];
    if (!SIGNAL_OPTION_KEYS.has(key)) {
      throw new PidfenceTypeError(
        `unknown option "${key.slice(0, 32)}"; known: group, forceGroupFallback.`,
        'ERR_PIDFENCE_INVALID_OPTIONS',
      );
    }
    if (option !== undefined && typeof option !== 'boolean') {
      throw new PidfenceTypeError(`option ${key} must be a boolean.`, 'ERR_PIDFENCE_INVALID_OPTIONS');
    }
  }
  const options = value as SignalOptions;
  return { group: options.group ?? false, forceGroupFallback: options.forceGroupFallback ?? false };
}

export function validateTimeoutMs(value: unknown): number {
  if (typeof value !== 'number') {
    throw new PidfenceTypeError('timeoutMs must be a number of milliseconds.', 'ERR_PIDFENCE_INVALID_TIMEOUT');
  }
  if (!Number.isInteger(value) || value < 0 || value > WAIT_EXIT_MAX_MS) {
    throw new PidfenceRangeError(
      `timeoutMs must be an integer from 0 to ${WAIT_EXIT_MAX_MS}.`,
      'ERR_PIDFENCE_INVALID_TIMEOUT',
    );
  }
  return value;
}
