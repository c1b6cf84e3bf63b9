// The launcher's order (docs/decisions/0071, 0150, 0180, 0250, 0441): what it needs to start the job, keep its
// output, stop its leftovers and sign its receipt, sent on a pipe at a fixed descriptor as
// length-prefixed fields that the native launcher parses without a JSON library. The limits are the
// launcher's (native/launcher/order.h).
import { PidfenceRangeError } from '../base/errors';
import { validateJobLogSettings } from './job-log';

/** The launcher's file descriptor that carries its LaunchOrder. */
export const LAUNCH_ORDER_FD = 3;

/** What happens to processes still alive when the job's leader ended (docs/decisions/0152). */
export type LeftoverPolicy = 'stop' | 'keep';
export const LEFTOVER_POLICIES: readonly LeftoverPolicy[] = ['stop', 'keep'];
export const LEFTOVER_POLICY_DEFAULT: LeftoverPolicy = 'stop';

const ORDER_MAGIC = 'PFO4';
/** The whole order; the kernel's exec limit for argv + env is far below it (ARG_MAX). */
export const ORDER_MAX_BYTES = 4 * 1024 * 1024;
export const ORDER_MAX_ARGS = 65_536;
/** The kernel's MAX_ARG_STRLEN (32 pages) counts the terminating NUL. */
export const ORDER_MAX_ARG_BYTES = 131_072 - 1;
export const ORDER_MAX_PATH_BYTES = 4095;
/** The longest leftover grace the launcher accepts: one hour. */
export const ORDER_MAX_GRACE_MS = 3_600_000;
/** How much nicer than its runner a job may be made (docs/decisions/0441): nice(1)'s range, the launcher's limit. */
export const JOB_NICE_MAX = 19;

/** Where the launcher keeps the job's output (docs/decisions/0250), and which streams it also copies to its own fds. */
export interface LaunchLog {
  readonly directory: string;
  readonly maxBytes: number;
  readonly keep: number;
  /** Copy the job's stdout to the launcher's fd 1 (a foreground run shows it). */
  readonly teeStdout: boolean;
  /** Copy the job's stderr to the launcher's fd 2. */
  readonly teeStderr: boolean;
}

const LOG_TEE_STDOUT = 1;
const LOG_TEE_STDERR = 2;

export interface LaunchOrder {
  readonly receiptDirectory: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly seq: number;
  readonly token: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly leftovers: LeftoverPolicy;
  /** How long leftovers get between TERM and KILL. */
  readonly leftoverGraceMs: number;
  /** The job's own cgroup directory, created by the runner (docs/decisions/0180); null: group containment. */
  readonly cgroupPath?: string | null;
  /** null: the job's output is not kept and it writes to the launcher's fds 1 and 2 directly. */
  readonly log: LaunchLog | null;
  /** How much nicer than the launcher the job runs (docs/decisions/0441); default 0, the same priority. */
  readonly jobNice?: number;
}

function u32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32LE(value, 0);
  return bytes;
}

function field(value: string, max: number, what: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > max || bytes.includes(0)) {
    throw new PidfenceRangeError(
      `${what} must be at most ${max} bytes and hold no NUL character; shorten it.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  return [u32(bytes.length), bytes];
}

/** Validates the leftover grace: an integer number of milliseconds up to ORDER_MAX_GRACE_MS. */
export function validateLeftoverGraceMs(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > ORDER_MAX_GRACE_MS) {
    throw new PidfenceRangeError(
      `leftoverGraceMs must be an integer from 0 to ${ORDER_MAX_GRACE_MS} (milliseconds).`,
      'ERR_PIDFENCE_INVALID_GRACE',
    );
  }
  return value;
}

/** Validates a job nice increment: a whole number from 0 to JOB_NICE_MAX (docs/decisions/0441). */
export function validateJobNice(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > JOB_NICE_MAX) {
    throw new PidfenceRangeError(
      `jobNice (--job-nice) must be a whole number from 0 to ${JOB_NICE_MAX}: how much nicer than the runner its jobs run, 0 for the same priority; you gave ${String(value).slice(0, 32)}.`,
      'ERR_PIDFENCE_INVALID_JOB_NICE',
    );
  }
  return value;
}

export function validateLeftoverPolicy(value: unknown): LeftoverPolicy {
  if (!LEFTOVER_POLICIES.includes(value as LeftoverPolicy)) {
    throw new PidfenceRangeError(
      `leftovers must be 'stop' or 'keep' (what happens to processes the job leaves behind).`,
      'ERR_PIDFENCE_INVALID_OPTIONS',
    );
  }
  return value as LeftoverPolicy;
}

/** Refuses a command line the launcher could not exec: too many or too long arguments, or a NUL. */
export function validateJobArgv(command: string, args: readonly string[]): Uint8Array[] {
  const argv = [command, ...args];
  if (command.length === 0 || argv.length > ORDER_MAX_ARGS) {
    throw new PidfenceRangeError(
      `a job needs a command and at most ${ORDER_MAX_ARGS - 1} arguments.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  const fields = argv.flatMap((arg, index) =>
    field(arg, ORDER_MAX_ARG_BYTES, index === 0 ? 'the command' : `argument ${index}`),
  );
  if (fields.reduce((sum, part) => sum + part.length, 0) > ORDER_MAX_BYTES - ORDER_MAX_PATH_BYTES) {
    throw new PidfenceRangeError(
      `the command and its arguments must total under ${ORDER_MAX_BYTES} bytes.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  return fields;
}

/** The log section: directory ('' for none), u32 size cap, u32 rotated files kept, u32 tee bits. */
function logFields(log: LaunchLog | null): Buffer[] {
  if (log === null) return [...field('', 0, 'the log directory'), u32(0), u32(0), u32(0)];
  const { directory, maxBytes, keep } = validateJobLogSettings(log);
  const tee = (log.teeStdout ? LOG_TEE_STDOUT : 0) | (log.teeStderr ? LOG_TEE_STDERR : 0);
  return [...field(directory, ORDER_MAX_PATH_BYTES, 'the log directory'), u32(maxBytes), u32(keep), u32(tee)];
}

/**
 * "PFO4", u32 seq, u32 grace, u32 policy (0 stop, 1 keep), then receiptDirectory, runId, attemptId,
 * token, u32 argc, command, args, the cgroup path ('' for none), the log section (logFields), then
 * u32 nice increment — each string a u32 byte length and its UTF-8 bytes, all little-endian.
 */
export function encodeLaunchOrder(order: LaunchOrder): Uint8Array {
  const argv = validateJobArgv(order.command, order.args);
  return Buffer.concat([
    Buffer.from(ORDER_MAGIC, 'ascii'),
    u32(order.seq),
    u32(validateLeftoverGraceMs(order.leftoverGraceMs)),
    u32(validateLeftoverPolicy(order.leftovers) === 'keep' ? 1 : 0),
    ...field(order.receiptDirectory, ORDER_MAX_PATH_BYTES, 'the receipt directory'),
    ...field(order.runId, ORDER_MAX_PATH_BYTES, 'runId'),
    ...field(order.attemptId, ORDER_MAX_PATH_BYTES, 'attemptId'),
    ...field(order.token, ORDER_MAX_PATH_BYTES, 'the receipt token'),
    u32(order.args.length + 1),
    ...argv,
    ...field(order.cgroupPath ?? '', ORDER_MAX_PATH_BYTES, 'the cgroup path'),
    ...logFields(order.log),
    u32(validateJobNice(order.jobNice ?? 0)),
  ]);
}
