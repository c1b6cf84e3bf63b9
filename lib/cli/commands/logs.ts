// `pidfence logs RUN [--follow]` (docs/decisions/0250): the output a run's job wrote, as its launcher
// kept it on this host — the rotated files, then the current one, byte for byte. Needs run.read on
// the run's project, like `show`; another project's run answers exactly like a missing one. With
// --follow it prints new output as it comes and ends once the run ended.
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';

import { PidfenceError } from '../../base/errors';
import { runIsActive } from '../../contract/index';
import { RunLogReader } from '../../execution/job-log';
import type { ManagementPlane } from '../../management/index';
import { oneShotCommand, type CliIo } from '../command';
import { logDirectoryOf } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { addManagementOptions, withManagementPlane, type ManagementOptions } from '../principal';
import { resolveStoreTarget } from '../store-target';

interface LogsOptions extends ManagementOptions {
  readonly follow?: boolean;
}

/** How often --follow looks for new output and at the run's state. */
export const FOLLOW_POLL_MS = 250;

function noLog(runId: string, directory: string): PidfenceError {
  return new PidfenceError(
    `run ${runId} has no log on this host (looked in ${directory}): it ran on another host, started before pidfence kept job logs, or ran with --no-log; on its runner's host, run pidfence logs there.`,
    'ERR_PIDFENCE_RUN_NO_LOG',
  );
}

/** Waits until `stream` takes more, or is gone; the listener that did not fire is removed. */
async function drained(stream: NodeJS.WritableStream): Promise<void> {
  const abort = new AbortController();
  try {
    await Promise.race([
      once(stream, 'drain', { signal: abort.signal }),
      once(stream, 'close', { signal: abort.signal }),
    ]);
  } finally {
    abort.abort();
  }
}

/** Writes what the reader has now; false once stdout is gone (a closed pipe: `| head`). */
async function copyAvailable(reader: RunLogReader, io: CliIo, gone: () => boolean): Promise<boolean> {
  for (let chunk = reader.read(); chunk !== null; chunk = reader.read()) {
    if (gone()) return false;
    if (!io.stdout.write(chunk)) await drained(io.stdout);
  }
  return !gone();
}

/** The run's state, through the plane (run.read is asked again each time, as a page refresh would). */
async function runActive(plane: ManagementPlane, runId: string): Promise<boolean> {
  return runIsActive((await plane.showRun(runId)).status);
}

async function printLog(
  plane: ManagementPlane,
  io: CliIo,
  runId: string,
  directory: string,
  follow: boolean,
): Promise<ExitCode> {
  let active = await runActive(plane, runId);
  const reader = new RunLogReader(directory, runId);
  let closed = false;
  io.stdout.on('error', () => {
    closed = true;
  });
  try {
    for (;;) {
      const opened = reader.open();
      if (opened && !(await copyAvailable(reader, io, () => closed))) return EXIT.ok;
      if (!opened && !(follow && active)) throw noLog(runId, directory);
      if (!follow || !active) return EXIT.ok;
      await delay(FOLLOW_POLL_MS);
      // Read once more after the run ended: its launcher finished writing before the run could end.
      active = await runActive(plane, runId);
    }
  } finally {
    reader.close();
  }
}

export const logsCommand = oneShotCommand<LogsOptions, [string]>(
  'logs',
  'the output of a run started on this host, kept by its launcher; --follow until the run ends (needs run.read)',
  (command) => {
    const defined = addManagementOptions(command)
      .argument('<run>', 'the run id')
      .option('-f, --follow', 'keep printing new output until the run ends');
    // The log is the job's bytes as written; --json changes only how an error is written (docs/decisions/0250).
    const json = defined.options.find((option) => option.long === '--json');
    if (json !== undefined) json.description = "an error as one JSON line; the output stays the job's bytes as written";
    return defined;
  },
  async (io, [runId], options) => {
    const directory = logDirectoryOf(resolveStoreTarget(options.db, io.env), io.env);
    return withManagementPlane(options, io, (plane) => printLog(plane, io, runId, directory, options.follow === true));
  },
);
