// Completion receipts (design/execution §2): the only normal completion fact. One file per attempt at an
// exact path, written atomically (temp file, fsync, rename, directory fsync) by the native launcher
// (v2, docs/decisions/0153), read and authenticated by the completion processor; v1 receipts (the
// Node launcher's) still parse. The token is a capability: only its digest is stored.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { SIGNAL_NAME_PATTERN, TOKEN_PATTERN } from '../base/limits';
import { shapeProblem } from '../base/shape';
import { validateId } from '../contract/index';

/** The version the launcher writes; parseReceipt accepts RECEIPT_VERSIONS. */
export const RECEIPT_VERSION = 2;
export const RECEIPT_VERSIONS = [1, 2] as const;
/** The launcher writes exactly one receipt per attempt: callback sequence 1. */
export const RECEIPT_CALLBACK_SEQ = 1;
/** A receipt file is a few hundred bytes; anything larger is malformed, never read whole. */
export const RECEIPT_MAX_BYTES = 2048;
/** Launcher and store clocks are the same host clock (SQLite) or NTP-close (PostgreSQL). */
export const RECEIPT_CLOCK_SKEW_MS = 60_000;
export const RECEIPT_TOKEN_BYTES = 32;
const RECEIPT_TOKEN_DIGEST_DOMAIN = 'pidfence.completion-receipt.v1\0';

export interface CompletionReceiptV1 {
  readonly v: 1;
  readonly runId: string;
  readonly attemptId: string;
  readonly seq: number;
  readonly token: string;
  /** null when the job was ended by a signal. */
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly startedAtMs: number;
  readonly finishedAtMs: number;
  /** The job could not be started at all (exitCode is then 127). */
  readonly spawnFailed: boolean;
}

export interface CompletionReceiptV2 extends Omit<CompletionReceiptV1, 'v'> {
  readonly v: 2;
  /** The boot the *BootMs values belong to; null when the launcher could not read it. */
  readonly bootId: string | null;
  /** CLOCK_BOOTTIME in ms (the time checks use these; *AtMs are wall clock, for people). */
  readonly startedBootMs: number;
  readonly finishedBootMs: number;
  /** How many processes the launcher stopped after the job's leader ended. */
  readonly leftovers: number;
}

export type CompletionReceipt = CompletionReceiptV1 | CompletionReceiptV2;

export function createReceiptToken(): string {
  return randomBytes(RECEIPT_TOKEN_BYTES).toString('base64url');
}

/** SHA-256(`pidfence.completion-receipt.v1\0` ‖ token), lowercase hex: what the attempt stores. */
export function receiptTokenDigest(token: string): string {
  return createHash('sha256').update(RECEIPT_TOKEN_DIGEST_DOMAIN, 'utf8').update(token, 'utf8').digest('hex');
}

export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Where the receipts of one store live: beside the SQLite file, or a directory the caller names. */
export function receiptPaths(
  directory: string,
  attemptId: string,
): { readonly final: string; readonly temp: string; readonly quarantined: string } {
  const id = validateId(attemptId, 'attemptId');
  return {
    final: path.join(directory, `${id}.receipt`),
    temp: path.join(directory, `${id}.receipt.tmp`),
    quarantined: path.join(directory, 'quarantine', `${id}.receipt`),
  };
}

/** Creates the receipt directory (0700: receipts hold a capability) and its quarantine folder. */
export function ensureReceiptDirectory(directory: string): void {
  try {
    fs.mkdirSync(path.join(directory, 'quarantine'), { recursive: true, mode: 0o700 });
  } catch (error) {
    // A read-only filesystem, a file in its place, a permission: said, never a stack trace.
    const code = (error as NodeJS.ErrnoException).code ?? 'UNKNOWN';
    throw new PidfenceError(
      `cannot create the completion receipt directory ${directory} (${code}); fix the path or its permissions, or keep the store (--db) or $PIDFENCE_RECEIPTS where this user can write.`,
      'ERR_PIDFENCE_RECEIPT_DIRECTORY',
      { errno: code, cause: error },
    );
  }
}

function fsyncDirectory(directory: string): void {
  const fd = fs.openSync(directory, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** temp (O_EXCL, 0600) → write → fsync → rename → fsync(dir): the receipt is whole or absent. */
export function writeReceiptAtomic(directory: string, receipt: CompletionReceipt): void {
  const paths = receiptPaths(directory, receipt.attemptId);
  fs.rmSync(paths.temp, { force: true }); // a launcher that died mid-write left it; the attempt is unique
  const fd = fs.openSync(paths.temp, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY, 0o600);
  try {
    fs.writeSync(fd, JSON.stringify(receipt));
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(paths.temp, paths.final);
  fsyncDirectory(directory);
}

const RECEIPT_KEYS_V1 = [
  'v',
  'runId',
  'attemptId',
  'seq',
  'token',
  'exitCode',
  'signal',
  'startedAtMs',
  'finishedAtMs',
  'spawnFailed',
] as const;
const RECEIPT_KEYS_V2 = [...RECEIPT_KEYS_V1, 'bootId', 'startedBootMs', 'finishedBootMs', 'leftovers'] as const;
const BOOT_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MS_MAX = 8_640_000_000_000_000;
/** The launcher counts leftovers in a u32. */
const LEFTOVERS_MAX = 4_294_967_295;

export type ReceiptRead =
  | { readonly kind: 'absent' }
  | { readonly kind: 'malformed' }
  | { readonly kind: 'parsed'; readonly receipt: CompletionReceipt };

function isInt(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/** Exact-shape parse: unknown keys, wrong types or out-of-range values make it malformed. */
export function parseReceipt(text: string): CompletionReceipt | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  // `signal` and `exitCode` are null, never absent: every key of the receipt's version is required.
  const version = (value as { v?: unknown } | null)?.v;
  if (version !== 1 && version !== 2) return null;
  if (shapeProblem(value, version === 1 ? RECEIPT_KEYS_V1 : RECEIPT_KEYS_V2) !== null) return null;
  const r = value as Record<string, unknown>;
  try {
    validateId(r.runId, 'runId');
    validateId(r.attemptId, 'attemptId');
  } catch {
    return null;
  }
  const ok =
    isInt(r.seq, 1, 1_000_000) &&
    typeof r.token === 'string' &&
    TOKEN_PATTERN.test(r.token) &&
    (r.exitCode === null || isInt(r.exitCode, 0, 255)) &&
    (r.signal === null || (typeof r.signal === 'string' && SIGNAL_NAME_PATTERN.test(r.signal))) &&
    (r.exitCode === null) !== (r.signal === null) &&
    isInt(r.startedAtMs, 0, MS_MAX) &&
    isInt(r.finishedAtMs, 0, MS_MAX) &&
    typeof r.spawnFailed === 'boolean' &&
    (version === 1 ||
      ((r.bootId === null || (typeof r.bootId === 'string' && BOOT_ID_PATTERN.test(r.bootId))) &&
        isInt(r.startedBootMs, 0, MS_MAX) &&
        isInt(r.finishedBootMs, 0, MS_MAX) &&
        isInt(r.leftovers, 0, LEFTOVERS_MAX)));
  return ok ? (r as unknown as CompletionReceipt) : null;
}

/**
 * Reads the receipt at its exact path (no directory listing), bounded in size. An absent receipt,
 * what a runner finds for every running job it looks at, is told by an lstat that throws nothing:
 * an open's ENOENT builds an Error with its stack each time (docs/decisions/0421).
 */
export function readReceipt(directory: string, attemptId: string): ReceiptRead {
  const { final } = receiptPaths(directory, attemptId);
  if (fs.lstatSync(final, { throwIfNoEntry: false }) === undefined) return { kind: 'absent' };
  let fd: number;
  try {
    fd = fs.openSync(final, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') return { kind: 'malformed' };
    throw error;
  }
  try {
    const buffer = Buffer.alloc(RECEIPT_MAX_BYTES + 1);
    const size = fs.readSync(fd, buffer, 0, buffer.length, 0);
    if (size > RECEIPT_MAX_BYTES) return { kind: 'malformed' };
    const receipt = parseReceipt(buffer.subarray(0, size).toString('utf8'));
    return receipt === null ? { kind: 'malformed' } : { kind: 'parsed', receipt };
  } finally {
    fs.closeSync(fd);
  }
}

/** Deletes the receipt (and a leftover temp file); absent is fine (idempotent cleanup). */
export function deleteReceipt(directory: string, attemptId: string): void {
  const paths = receiptPaths(directory, attemptId);
  fs.rmSync(paths.final, { force: true });
  fs.rmSync(paths.temp, { force: true });
}

/** Moves the receipt into quarantine/ (after its intent was saved); absent is fine. */
export function quarantineReceipt(directory: string, attemptId: string): void {
  const paths = receiptPaths(directory, attemptId);
  try {
    fs.renameSync(paths.final, paths.quarantined);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

export function validateReceiptDirectory(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || !path.isAbsolute(value)) {
    throw new PidfenceRangeError(
      'receiptDirectory must be an absolute directory path.',
      'ERR_PIDFENCE_INVALID_RECEIPT_DIRECTORY',
    );
  }
  return value;
}
