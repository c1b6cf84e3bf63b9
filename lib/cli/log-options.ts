// The job-log options of the commands that start jobs (docs/decisions/0250): `--log-max 10m`,
// `--log-keep 2`, `--no-log`. Sizes take k, m or g (powers of 1024) or a bare number of bytes.
import type { Command } from 'commander';

import { PidfenceRangeError } from '../base/errors';
import {
  JOB_LOG_KEEP_DEFAULT,
  JOB_LOG_KEEP_MAX,
  JOB_LOG_MAX_BYTES_MAX,
  JOB_LOG_MAX_BYTES_MIN,
  type JobLogSettings,
} from '../execution/job-log';

export interface LogOptions {
  readonly logMax?: string;
  readonly logKeep?: string;
  /** commander's `--no-log`: false when given. */
  readonly log: boolean;
}

const SIZE = /^(\d{1,10})([kmg])?$/i;
const UNIT_BYTES: Readonly<Record<string, number>> = { k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

function invalid(message: string): PidfenceRangeError {
  return new PidfenceRangeError(message, 'ERR_PIDFENCE_INVALID_LOG_OPTIONS');
}

export function parseLogSize(text: string): number {
  const match = SIZE.exec(text.trim());
  const bytes = match === null ? Number.NaN : Number(match[1]) * (UNIT_BYTES[(match[2] ?? '').toLowerCase()] ?? 1);
  if (!Number.isSafeInteger(bytes) || bytes < JOB_LOG_MAX_BYTES_MIN || bytes > JOB_LOG_MAX_BYTES_MAX) {
    throw invalid(`--log-max must be a size from 16k to 1g, such as 512k or 10m; you gave ${text.trim()}.`);
  }
  return bytes;
}

export function parseLogKeep(text: string): number {
  if (!/^\d{1,2}$/.test(text.trim()) || Number(text) > JOB_LOG_KEEP_MAX)
    throw invalid(
      `--log-keep must be a number of rotated logs from 0 to ${JOB_LOG_KEEP_MAX}; you gave ${text.trim()}.`,
    );
  return Number(text);
}

export function addLogOptions(command: Command): Command {
  return command
    .option('--log-max <size>', "rotate the job's log at this size (16k to 1g)", '10m')
    .option(
      '--log-keep <n>',
      `rotated logs kept besides the current one (0-${JOB_LOG_KEEP_MAX})`,
      String(JOB_LOG_KEEP_DEFAULT),
    )
    .option('--no-log', "do not keep the job's output (it still reaches the terminal)");
}

/** The execution's `logs` option: in `directory`, or not kept with --no-log. Checked before anything starts. */
export function logSettingsOf(options: LogOptions, directory: string): JobLogSettings | false {
  if (!options.log) return false;
  return {
    directory,
    ...(options.logMax === undefined ? {} : { maxBytes: parseLogSize(options.logMax) }),
    ...(options.logKeep === undefined ? {} : { keep: parseLogKeep(options.logKeep) }),
  };
}
