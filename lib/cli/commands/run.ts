// `pidfence run [--timeout D] [--project P] [--name N] -- cmd args…`: admit one job, run it in the
// foreground (its own output only, also kept in the run's log, docs/decisions/0250; pidfence prints
// the run id and the end on stderr, never the command or environment) and exit with the job's status. The run is the job's runner
// (docs/decisions/0070). SIGINT, SIGTERM and SIGHUP (a closed terminal) drain it (`shutdown`); a
// second one sends KILL to the job's group through the held pidfd. It exits only once the job has
// converged, so it never leaves the job behind; if it is killed outright, `supervise` or `cancel`
// on this host takes the job over. With --json the job writes to stderr and stdout carries one
// RunReport (docs/decisions/0141).
import type { Command } from 'commander';

import { PidfenceError, PidfenceRangeError } from '../../base/errors';
import { validateRunName } from '../../contract/index';
import { createExecution, type CompletionOutcome, type ExecutionApplication as Execution } from '../../execution/index';
import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { addControlPlaneOptions, controlPlaneTarget, type ControlPlaneOptions } from '../control-plane-target';
import { capabilities } from '../../native/index';
import { GRACE_MS_MAX } from '../../process/index';
import { addCgroupOption, applyCgroupOption, refuseCgroupOnCluster, type CgroupOptions } from '../cgroup-option';
import { DURATION_HELP, parseDuration, parseDurationWithin } from '../duration';
import { graceNotice, jobStartFailureMessage, stopHint } from '../job-messages';
import { logDirectoryOf, openExecutionTarget, type ExecutionTarget } from '../execution-target';
import { addLogOptions, logSettingsOf, type LogOptions } from '../log-options';
import type { ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import { runReportOf, type RunReport } from '../run-report';
import { resolveStoreTarget } from '../store-target';
import { routeSignals, STOP_SIGNALS } from '../startup-signals';

interface RunOptions extends StoreOptions, ControlPlaneOptions, LogOptions, CgroupOptions {
  readonly timeout?: string;
  readonly project: string;
  readonly grace: string;
  readonly detach?: boolean;
  readonly stopAfterDisconnect?: string;
  readonly name?: string;
}

/** The end line on stderr: how the run ended, and why a job that never started did not. */
function endLine(report: RunReport): string {
  if (report.status === null) return `pidfence: run ${report.runId} did not converge before the drain timed out\n`;
  const why = report.startFailure === null ? '' : `: ${jobStartFailureMessage(report.startFailure)}`;
  return `pidfence: run ${report.runId} ${report.status}${why}\n`;
}

/** What the foreground run knows as it goes: its run id once admitted, the interrupts, its completion. */
interface ForegroundState {
  runId: string | null;
  interrupts: number;
  draining: boolean;
  readonly completion: Promise<CompletionOutcome>;
  readonly finished: (outcome: CompletionOutcome) => void;
}

function foregroundState(): ForegroundState {
  let finished: (outcome: CompletionOutcome) => void = () => undefined;
  const completion = new Promise<CompletionOutcome>((resolve) => {
    finished = resolve;
  });
  return { runId: null, interrupts: 0, draining: false, completion, finished: (outcome) => finished(outcome) };
}

/** This process as the job's runner: it reports the job's completion, a stop's grace and a full disk. */
function foregroundExecution(
  io: CliIo,
  target: ExecutionTarget,
  settings: { graceMs: number; logs: ReturnType<typeof logSettingsOf> },
  state: ForegroundState,
): Execution {
  const tty = (io.stderr as NodeJS.WriteStream).isTTY === true;
  return createExecution({
    stores: target.stores,
    receiptDirectory: target.receiptDirectory,
    wakeDirectory: target.wakeDirectory,
    logs: settings.logs,
    onWakeRefused: (error) => {
      io.stderr.write(`pidfence: ${error.message} (${error.code})\n`);
    },
    graceMs: settings.graceMs,
    runnerKind: 'run',
    env: io.env,
    // The foreground command lives until its run completes: the one timer holds the process.
    keepAlive: true,
    onCompleted: (ref, outcome) => {
      if (ref.runId === state.runId) state.finished(outcome);
    },
    // A cancel or a timeout: say why the next seconds are quiet (an interrupt already said so).
    onStopping: (ref) => {
      const notice =
        ref.runId === state.runId && state.interrupts === 0 ? graceNotice(tty, ref.runId, settings.graceMs) : null;
      if (notice !== null) io.stderr.write(notice);
    },
    // A full disk (docs/decisions/0191): said once, then waited out by itself.
    onStoreFull: (error) => {
      io.stderr.write(storeFullNotice(error, state.draining));
    },
  });
}

/** The first stop signal drains the run (TERM, then KILL after the grace); a second one sends KILL now. */
function interruptOf(app: Execution, io: CliIo, state: ForegroundState): (signal: NodeJS.Signals) => void {
  return (signal) => {
    state.interrupts += 1;
    if (state.interrupts === 1) {
      io.stderr.write(
        `pidfence: ${signal}: stopping the job (TERM, then KILL after the grace period); ${signal === 'SIGHUP' ? 'signal' : 'press Ctrl-C'} again to KILL it now\n`,
      );
      // The drain converges the run through the same processor; its result is then read back.
      state.draining = true;
      void app.drain().then(
        () => state.finished({ kind: 'active' }),
        () => state.finished({ kind: 'active' }),
      );
      return;
    }
    const sent = app.escalate();
    io.stderr.write(
      `pidfence: ${signal} again: ${sent > 0 ? "sent KILL to the job's process group" : "the job's group is not held; waiting for the stop"}\n`,
    );
  };
}

/** Admits and starts the job; says its run id and how to stop it. */
async function admitJob(
  app: Execution,
  job: { command: string; args: readonly string[]; name: string | null; timeoutMs: number | undefined },
  options: RunOptions,
  io: CliIo,
): Promise<string> {
  const { name, timeoutMs } = job;
  const admitted = await app.admit({
    // Under --json stdout is pidfence's one document: the job writes to stderr instead.
    projectId: options.project,
    ...(name === null ? {} : { name }),
    command: job.command,
    args: job.args,
    stdio: options.json === true ? ['inherit', 2, 'inherit'] : 'inherit',
    env: io.env,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });
  if (admitted.kind !== 'admitted') {
    throw new PidfenceError(
      `the run was not admitted (${admitted.reason}): pidfence was already stopping, so nothing was started; run it again.`,
      'ERR_PIDFENCE_RUN_REFUSED',
    );
  }
  io.stderr.write(
    `pidfence: run ${admitted.runId} started (stop it with: ${stopHint(admitted.runId, options.db, io.env)})\n`,
  );
  if (capabilities().groupSignalMode === 'unsupported') {
    io.stderr.write(
      'pidfence: warning: this kernel or build cannot prove process identities, so neither --timeout nor cancel can stop this job; it runs to its own end.\n',
    );
  }
  return admitted.runId;
}

async function runAction(
  command: string,
  args: readonly string[],
  options: RunOptions,
  io: CliIo,
): Promise<ExitCode | number> {
  const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, '--timeout');
  // Before the store is opened: a subtree that cannot be used changes nothing (docs/decisions/0301).
  applyCgroupOption(options);
  const graceMs = parseDurationWithin(options.grace, '--grace', GRACE_MS_MAX);
  const name = options.name === undefined ? null : validateRunName(options.name);
  const storeTarget = resolveStoreTarget(options.db, io.env);
  const logs = logSettingsOf(options, logDirectoryOf(storeTarget, io.env));
  const target = await openExecutionTarget(storeTarget, io.env);
  const state = foregroundState();
  const app = foregroundExecution(io, target, { graceMs, logs }, state);
  // A terminal that went away (SIGHUP) makes writes fail; the run goes on to stop its job.
  io.stderr.on?.('error', () => undefined);
  // Signals held since start-up (docs/decisions/0162) arrive here now.
  const release = routeSignals(RUN_STOP_SIGNALS, interruptOf(app, io, state));
  try {
    state.runId = await admitJob(app, { command, args, name, timeoutMs }, options, io);
    app.start();
    const report = runReportOf(state.runId, name, options.project, await state.completion);
    io.stderr.write(endLine(report));
    if (options.json === true) writeJson(io, report);
    return report.exitStatus;
  } finally {
    await app.drain();
    release();
  }
}

/** A local run (its job's runner is this process), or with --control-plane a cluster run (docs/decisions/0243). */
async function runSomewhere(
  command: string,
  args: readonly string[],
  options: RunOptions,
  self: Command,
  io: CliIo,
): Promise<ExitCode | number> {
  const target = controlPlaneTarget(options, io.env);
  if (target === null) {
    if (options.detach === true)
      throw new PidfenceRangeError(
        "--detach needs --control-plane: a local run is its job's runner and ends with it.",
        'ERR_PIDFENCE_USAGE',
      );
    if (options.stopAfterDisconnect !== undefined)
      throw new PidfenceRangeError(
        '--stop-after-disconnect needs --control-plane: a local run has no control plane to lose.',
        'ERR_PIDFENCE_USAGE',
      );
    return runAction(command, args, options, io);
  }
  refuseCgroupOnCluster(options);
  if (self.getOptionValueSource('grace') === 'cli')
    throw new PidfenceRangeError(
      "--grace is the worker's on a cluster (pidfence worker --grace); drop it here.",
      'ERR_PIDFENCE_USAGE',
    );
  const { runOnCluster } = await import('../cluster-runs');
  return runOnCluster(
    target,
    [command, ...args],
    {
      project: options.project,
      ...(options.name === undefined ? {} : { name: validateRunName(options.name) }),
      ...(options.timeout === undefined ? {} : { timeoutMs: parseDuration(options.timeout, '--timeout') }),
      ...(options.json === undefined ? {} : { json: options.json }),
      ...(options.detach === undefined ? {} : { detach: options.detach }),
      ...(options.stopAfterDisconnect === undefined
        ? {}
        : { stopAfterDisconnectMs: parseDuration(options.stopAfterDisconnect, '--stop-after-disconnect') }),
    },
    io,
  );
}

/** What `run` says when its store's disk is full: the store's sentence, then what happens now. */
export function storeFullNotice(error: { readonly message: string; readonly code: string }, stopping: boolean): string {
  const next = stopping
    ? 'the stop is retried until there is room, and nothing is signalled before it is recorded; press Ctrl-C again to KILL the job now'
    : 'pidfence retries by itself until there is room';
  return `pidfence: ${error.message} (${error.code})\npidfence: ${next}\n`;
}

/** The signals that stop a foreground run; a second one escalates to KILL. */
export const RUN_STOP_SIGNALS: readonly NodeJS.Signals[] = STOP_SIGNALS.run;

export const runCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    const run = addLogOptions(addStoreOptions(program.command('run')))
      .description(
        'run a job in the foreground as its own process group (its output kept: pidfence logs RUN); exit with its status',
      )
      .option(
        '--timeout <duration>',
        `stop the job (TERM, then KILL after the grace) once this has passed, and exit 124: ${DURATION_HELP}`,
      )
      .option('--project <id>', 'the project the run belongs to', 'default')
      .option(
        '--name <name>',
        'a name to find the run by in list, show and the status page (letters, digits, . _ : @ -; at most 64)',
      )
      .option('--grace <duration>', `TERM grace before KILL when the job is stopped: ${DURATION_HELP}`, '5s');
    addCgroupOption(run, 'made')
      .argument('<command>', 'the program to run (no shell is involved)')
      .argument('[args...]', 'its arguments (put -- before the command)');
    addControlPlaneOptions(run)
      .option('--detach', 'with --control-plane: return once the job is queued, printing its run id')
      .option(
        '--stop-after-disconnect <duration>',
        `with --control-plane: its worker stops the job once it could not renew for this long (1s to 1d; default: an outage never stops it): ${DURATION_HELP}`,
      )
      .action(async (command: string, args: string[], options: RunOptions, self: Command) => {
        done((await runSomewhere(command, args, options, self, io)) as ExitCode);
      });
  },
};
