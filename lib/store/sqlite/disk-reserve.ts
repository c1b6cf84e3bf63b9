// The SQLite store's disk reserve (docs/decisions/0191): a file of DISK_RESERVE_BYTES beside the
// database, written while the disk has room and given back to the filesystem when a write on the
// stop path finds the disk full, so the intent to stop a job (and the writes that stop and end it)
// can still be committed before any signal. Also: what "the disk is full" looks like from SQLite,
// and the one error that says so, naming the store and its filesystem.
import {
  closeSync,
  constants as fsConstants,
  openSync,
  realpathSync,
  readFileSync,
  rmSync,
  statfsSync,
  statSync,
  writeSync,
} from 'node:fs';
import { randomFillSync } from 'node:crypto';
import path from 'node:path';

import { PidfenceError, STORE_FULL_CODE } from '../../base/errors';

/** About 16 stops' worth of WAL frames (intent, claim, result, end: ~60 KiB each), measured on tmpfs. */
export const DISK_RESERVE_BYTES = 1024 * 1024;
/** The reserve is written again only when this much is free, so it never takes the last of the room. */
export const DISK_RESERVE_REWRITE_FREE_BYTES = 2 * DISK_RESERVE_BYTES;
/** Below this, an I/O error of SQLite is read as a full disk (it also reports SHMSIZE, WRITE or FSYNC then). */
const NEARLY_FULL_BYTES = 64 * 1024;
const WRITE_CHUNK_BYTES = 64 * 1024;
/** A reserve shorter than it should be and older than this was cut short (ENOSPC, a crash), not being written. */
const PARTIAL_RESERVE_AGE_MS = 60_000;

export function reservePath(file: string): string {
  return `${file}.reserve`;
}

/** Bytes an unprivileged writer may still use on the filesystem of `anyPath`; null when it cannot be asked. */
export function freeBytes(anyPath: string): number | null {
  try {
    const stats = statfsSync(anyPath);
    return Number(stats.bavail) * Number(stats.bsize);
  } catch {
    return null;
  }
}

/** The mount point of the filesystem that holds `file`'s directory (the longest matching mount). */
export function mountPointOf(file: string): string {
  let directory: string;
  try {
    directory = realpathSync(path.dirname(file));
  } catch {
    return path.dirname(file);
  }
  let best = '/';
  try {
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      // Field 5 is the mount point, with spaces and such escaped as octal.
      const point = (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, octal: string) =>
        String.fromCharCode(parseInt(octal, 8)),
      );
      const inside = point === '/' || directory === point || directory.startsWith(`${point}/`);
      if (inside && point.length > best.length) best = point;
    }
  } catch {
    // no /proc: the root stands for the disk
  }
  return best;
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

/**
 * SQLite's ways of saying the disk is full: SQLITE_FULL for the database and its WAL, an I/O error
 * (SHMSIZE when the -shm cannot grow, WRITE, FSYNC) while the filesystem has next to nothing left.
 */
export function isDiskFull(error: unknown, file: string): boolean {
  const code = codeOf(error);
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return true;
  if (!code.startsWith('SQLITE_IOERR')) return false;
  const free = freeBytes(path.dirname(file));
  return free !== null && free < NEARLY_FULL_BYTES;
}

/** ERR_PIDFENCE_STORE_FULL: which store, which filesystem, how much is left, and what to do. */
export function storeFull(file: string, what: string, cause?: unknown): PidfenceError {
  const free = freeBytes(path.dirname(file));
  return new PidfenceError(
    `the disk holding ${file} is full (filesystem ${mountPointOf(file)}, ${free === null ? 'free space unknown' : `${free} bytes free`}): ${what}. Free space on that filesystem, then try again.`,
    STORE_FULL_CODE,
    { errno: codeOf(cause) || 'ENOSPC', cause },
  );
}

/** What `ensure` found or did. */
export type ReserveState = 'kept' | 'written' | 'no_room' | 'unwritable';

/**
 * Writes the reserve in chunks of random bytes (a compressing filesystem must not shrink it). Not
 * synced: the blocks are taken from the free count at write() (delayed allocation reserves them
 * too); a reserve cut short by a crash is found short and written again.
 */
function writeReserve(target: string): void {
  const fd = openSync(target, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY, 0o600);
  try {
    const chunk = randomFillSync(Buffer.alloc(WRITE_CHUNK_BYTES));
    for (let written = 0; written < DISK_RESERVE_BYTES; written += WRITE_CHUNK_BYTES)
      writeSync(fd, chunk, 0, Math.min(WRITE_CHUNK_BYTES, DISK_RESERVE_BYTES - written));
  } finally {
    closeSync(fd);
  }
}

/**
 * The reserve beside `file`: kept when it is there whole; else written when the filesystem has
 * DISK_RESERVE_REWRITE_FREE_BYTES free. A write cut short (ENOSPC, a crash) never stays behind.
 */
export function ensureDiskReserve(file: string): ReserveState {
  const target = reservePath(file);
  try {
    const stats = statSync(target);
    if (stats.size === DISK_RESERVE_BYTES) return 'kept';
    // Short: another process may be writing it right now; one cut short long ago is replaced. (A
    // file's mtime is wall time; a clock step only makes this keep or replace a short reserve early.)
    if (Date.now() - stats.mtimeMs < PARTIAL_RESERVE_AGE_MS) return 'kept';
    rmSync(target, { force: true });
  } catch {
    // absent: written below
  }
  const free = freeBytes(path.dirname(file));
  if (free === null || free < DISK_RESERVE_REWRITE_FREE_BYTES) return 'no_room';
  try {
    writeReserve(target);
    return 'written';
  } catch (error) {
    if (codeOf(error) === 'EEXIST') return 'kept';
    rmSync(target, { force: true });
    return codeOf(error) === 'ENOSPC' || codeOf(error) === 'EDQUOT' ? 'no_room' : 'unwritable';
  }
}

/** Gives the reserve back to the filesystem; true when there was one to give. */
export function releaseDiskReserve(file: string): boolean {
  try {
    rmSync(reservePath(file));
    return true;
  } catch {
    return false;
  }
}

/** How often a store that keeps a reserve looks whether it must be written again (after a release, or at first). */
export const DISK_RESERVE_CHECK_MS = 30_000;

/**
 * The reserve of one connection's file: `write` when this opener keeps it (a runner's store), else
 * it may only give it back. Looked after lazily, on the store's own reads and writes.
 */
export class DiskReserveKeeper {
  readonly file: string;
  readonly #write: boolean;
  readonly #now: () => number;
  #nextCheckAt = -Infinity;

  constructor(file: string, options: { readonly write: boolean; readonly now: () => number }) {
    this.file = file;
    this.#write = options.write;
    this.#now = options.now;
  }

  /** Writes the reserve again when it is due for a look (never more than once per DISK_RESERVE_CHECK_MS). */
  maintain(): void {
    if (!this.#write || this.#now() < this.#nextCheckAt) return;
    this.#nextCheckAt = this.#now() + DISK_RESERVE_CHECK_MS;
    ensureDiskReserve(this.file);
  }

  /** Gives the reserve back; the next look (soon) writes it again once there is room. */
  release(): boolean {
    this.#nextCheckAt = this.#now() + DISK_RESERVE_CHECK_MS;
    return releaseDiskReserve(this.file);
  }
}
