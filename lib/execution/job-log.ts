// The job's log (docs/decisions/0250): where a run's stdout and stderr are kept on its runner's host
// (`<directory>/<runId>.log`, rotated to `.1` … `.keep`), its size cap, and the settings the native
// launcher gets in its order. The launcher writes the files; the log's bytes never reach the store,
// an event, a metric or an error.
import * as fs from 'node:fs';
import path from 'node:path';

import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { validateId } from '../contract/index';

/** A log file's size cap: small enough for a router's flash, large enough for a day of a chatty job. */
export const JOB_LOG_MAX_BYTES_DEFAULT = 10 * 1024 * 1024;
/** Rotated files kept besides the current one: at most (1 + 2) × 10 MiB per run by default. */
export const JOB_LOG_KEEP_DEFAULT = 2;
/** Below this a rotation would cut most lines; the launcher reads at most half the cap at a time. */
export const JOB_LOG_MAX_BYTES_MIN = 16 * 1024;
/** One file stays readable by ordinary tools (and fits the launcher's u32). */
export const JOB_LOG_MAX_BYTES_MAX = 1024 * 1024 * 1024;
export const JOB_LOG_KEEP_MAX = 20;

/** Where and how much of each run's output a runner keeps. */
export interface JobLogSettings {
  /** Absolute directory of the logs (created 0700). */
  readonly directory: string;
  /** Size cap of one file, in bytes (default JOB_LOG_MAX_BYTES_DEFAULT). */
  readonly maxBytes?: number;
  /** Rotated files kept (default JOB_LOG_KEEP_DEFAULT); 0 starts the file afresh at the cap. */
  readonly keep?: number;
}

/** The directory of the logs of a store: beside it (`<store>.logs`) or beside a PostgreSQL store's receipts. */
export function logDirectoryBeside(storeFileOrReceipts: string): string {
  return `${storeFileOrReceipts}.logs`;
}

function invalid(message: string): PidfenceRangeError {
  return new PidfenceRangeError(message, 'ERR_PIDFENCE_INVALID_LOG_OPTIONS');
}

export function validateJobLogSettings(value: JobLogSettings): Required<JobLogSettings> {
  const { directory, maxBytes = JOB_LOG_MAX_BYTES_DEFAULT, keep = JOB_LOG_KEEP_DEFAULT } = value;
  if (typeof directory !== 'string' || !path.isAbsolute(directory))
    throw invalid('the log directory must be an absolute path.');
  if (!Number.isSafeInteger(maxBytes) || maxBytes < JOB_LOG_MAX_BYTES_MIN || maxBytes > JOB_LOG_MAX_BYTES_MAX) {
    throw invalid(
      `the log size cap must be from ${JOB_LOG_MAX_BYTES_MIN} bytes (16k) to ${JOB_LOG_MAX_BYTES_MAX} bytes (1g).`,
    );
  }
  if (!Number.isSafeInteger(keep) || keep < 0 || keep > JOB_LOG_KEEP_MAX)
    throw invalid(`the number of rotated logs kept must be from 0 to ${JOB_LOG_KEEP_MAX}.`);
  return { directory, maxBytes, keep };
}

/** Creates the log directory owner-only: a job's output may hold anything it printed. */
export function ensureLogDirectory(directory: string): void {
  try {
    fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'UNKNOWN';
    throw new PidfenceError(
      `cannot create the job log directory ${directory} (${code}); fix the path or its permissions, or start the job with --no-log.`,
      'ERR_PIDFENCE_LOG_DIRECTORY',
      { errno: code, cause: error },
    );
  }
}

/** The current log file of a run. */
export function runLogPath(directory: string, runId: string): string {
  return path.join(directory, `${validateId(runId, 'runId')}.log`);
}

/**
 * The run's log files that exist now, oldest first (`.N` … `.1`, then the current one), each
 * looked up by its exact name: a log directory is never listed.
 */
export function runLogFiles(directory: string, runId: string): string[] {
  const current = runLogPath(directory, runId);
  const rotated = Array.from({ length: JOB_LOG_KEEP_MAX }, (_, index) => `${current}.${JOB_LOG_KEEP_MAX - index}`);
  return [...rotated, current].filter((file) => fs.existsSync(file));
}

/** A run's log read in order — its rotated files, then the current one — and, when followed, as it grows. */
export class RunLogReader {
  static readonly CHUNK_BYTES = 64 * 1024;
  readonly #current: string;
  readonly #directory: string;
  readonly #runId: string;
  /** Open files still to read; the last one is the current file while it is followed. */
  readonly #files: number[] = [];
  #currentIno: number | null = null;

  constructor(directory: string, runId: string) {
    this.#directory = directory;
    this.#runId = runId;
    this.#current = runLogPath(directory, runId);
  }

  /** Opens every file of the log in one pass (a rotation meanwhile is unlikely); false when there is none yet. */
  open(): boolean {
    if (this.#files.length > 0) return true;
    for (const file of runLogFiles(this.#directory, this.#runId)) {
      const fd = openIfPresent(file);
      if (fd === null) continue;
      this.#files.push(fd);
      if (file === this.#current) this.#currentIno = fs.fstatSync(fd).ino;
    }
    return this.#files.length > 0;
  }

  /** The next bytes there are now, or null; moves on to a new current file after a rotation. */
  read(): Uint8Array | null {
    const buffer = Buffer.alloc(RunLogReader.CHUNK_BYTES);
    while (this.#files.length > 0) {
      const fd = this.#files[0] as number;
      const got = fs.readSync(fd, buffer, 0, buffer.length, null);
      if (got > 0) return buffer.subarray(0, got);
      if (this.#files.length > 1) {
        fs.closeSync(this.#files.shift() as number);
        continue;
      }
      if (!this.#followRotation()) return null;
    }
    return null;
  }

  close(): void {
    for (const fd of this.#files.splice(0)) fs.closeSync(fd);
  }

  /**
   * The current file was rotated away and a new one exists: read that next, after what the old
   * one got between the last read and the rotation.
   */
  #followRotation(): boolean {
    let ino: number;
    try {
      ino = fs.statSync(this.#current).ino;
    } catch {
      return false; // between the rename and the new file
    }
    if (ino === this.#currentIno) return false;
    const fd = openIfPresent(this.#current);
    if (fd === null) return false;
    this.#files.push(fd);
    this.#currentIno = fs.fstatSync(fd).ino;
    return true;
  }
}

/** A log file opened to read; null when it is not there. One the caller may not read is a typed refusal. */
function openIfPresent(file: string): number | null {
  try {
    return fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'EACCES' || code === 'EPERM' || code === 'ELOOP') {
      throw new PidfenceError(
        `cannot read the log ${file} (${code}): a job's log is owner-only; read it as the user who ran the job.`,
        'ERR_PIDFENCE_RUN_LOG_UNREADABLE',
        { errno: code },
      );
    }
    throw error;
  }
}
