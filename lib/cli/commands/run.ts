// `pidfence run [--timeout D] [--project P] -- cmd args…`: admit one job, run it in the
// foreground (its own output only; pidfence prints the run id and the end on stderr, never the
// command or environment) and exit with the job's status. The run is the job's runner
// (docs/decisions/0070). SIGINT, SIGTERM and SIGHUP (a closed terminal) drain it (`shutdown`); a
// second one sends KILL to the job's group through the held pidfd. It exits only once the job has
// converged, so it never leaves the job behind; if it is killed outright, `supervise` or `cancel`
// on this host takes the job over. With --json the job writes to stderr and stdout carries one
// RunReport (docs/decisions/0141).
import { constants as osConstants } from 'node:os';

import type { Command } from 'commander';

import { PidfenceError } from '../../base/errors';
import type { RunTerminalStatus } from '../../contract/index';
import { createExecution, type CompletionOutcome, type StartFailure } from '../../execution/index';
import type { RunExit } from '../../management/index';
import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { capabilities } from '../../native/index';
import { GRACE_MS_MAX } from '../../process/index';
import { parseDuration, parseDurationWithin } from '../duration';
import { graceNotice, jobStartFailureMessage, stopHint } from '../job-messages';
import { openExecutionTarget } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import { resolveStoreTarget } from '../store-target';

interface RunOptions extends StoreOptions {
  readonly timeout?: string;
  readonly project: string;
  readonly grace: string;
}

/** What `timeout(1)` answers for a command it timed out: a run that timed out never exits 0. */
export const TIMED_OUT_EXIT = 124;

/** The job's status as a shell reports it: its exit code, or 128 + the signal that ended it. */
export function exitStatusOf(outcome: CompletionOutcome): number {
  const status = jobExitStatus(outcome);
  const timedOut = (outcome.kind === 'completed' || outcome.kind === 'terminal') && outcome.status === 'timed_out';
  return timedOut && status === 0 ? TIMED_OUT_EXIT : status;
}

function jobExitStatus(outcome: CompletionOutcome): number {
  if (outcome.kind === 'terminal') return outcome.status === 'succeeded' ? EXIT.ok : EXIT.failure;
  if (outcome.kind !== 'completed') return EXIT.failure;
  if (outcome.exitCode !== null) return outcome.exitCode;
  if (outcome.signal !== null) return 128 + ((osConstants.signals as Record<string, number>)[outcome.signal] ?? 0);
  // Stopped without a receipt: the group was killed after its grace period.
  return outcome.cause === 'stopped' ? 128 + osConstants.signals.SIGKILL : EXIT.failure;
}

/** What `run --json` prints on stdout once the run ended (docs/decisions/0141): one document. */
export interface RunReport {
  readonly runId: string;
  readonly projectId: string;
  /** The run's terminal status; null when the drain timed out before it converged. */
  readonly status: RunTerminalStatus | null;
  /** pidfence's own exit status: the job's, as a shell reports it (124 for a timed-out job that exited 0). */
  readonly exitStatus: number;
  /** How the job ended: exit code or signal, and the cause; null when that is not known. */
  readonly exit: RunExit | null;
  /** The job could not be started at all: `command_not_found` (exit 127) or `permission_denied` (126). */
  readonly startFailure: StartFailure | null;
}

export function runReportOf(runId: string, projectId: string, outcome: CompletionOutcome): RunReport {
  const completed = outcome.kind === 'completed' ? outcome : null;
  return {
    runId,
    projectId,
    status: outcome.kind === 'completed' || outcome.kind === 'terminal' ? outcome.status : null,
    exitStatus: exitStatusOf(outcome),
    exit: completed === null ? null : { cause: completed.cause, exitCode: completed.exitCode, signal: completed.signal },
    startFailure: completed?.startFailure ?? null,
  };
}

/** The end line on stderr: how the run ended, and why a job that never started did not. */
function endLine(report: RunReport): string {
  if (report.status === null) return `pidfence: run ${report.runId} did not converge before the drain timed out\n`;
  const why = report.startFailure === null ? '' : `: ${jobStartFailureMessage(report.startFailure)}`;
  return `pidfence: run ${report.runId} ${report.status}${why}\n`;
}

async function runAction(command: string, args: readonly string[], options: RunOptions, io: CliIo): Promise<ExitCode | number> {
  const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout, '--timeout');
  const graceMs = parseDurationWithin(options.grace, '--grace', GRACE_MS_MAX);
  const target = await openExecutionTarget(resolveStoreTarget(options.db, io.env), io.env);
  let finished: ((outcome: CompletionOutcome) => void) | undefined;
  const completion = new Promise<CompletionOutcome>((resolve) => { finished = resolve; });
  let runId: string | null = null;
  let interrupts = 0;
  const tty = (io.stderr as NodeJS.WriteStream).isTTY === true;
  const app = createExecution({
    stores: target.stores,
    receiptDirectory: target.receiptDirectory,
    graceMs,
    runnerKind: 'run',
    env: io.env,
    // The foreground command lives until its run completes: the one timer holds the process.
    keepAlive: true,
    onCompleted: (ref, outcome) => { if (ref.runId === runId) finished?.(outcome); },
    // A cancel or a timeout: say why the next seconds are quiet (an interrupt already said so).
    onStopping: (ref) => {
      const notice = ref.runId === runId && interrupts === 0 ? graceNotice(tty, ref.runId, graceMs) : null;
      if (notice !== null) io.stderr.write(notice);
    },
  });
  // A terminal that went away (SIGHUP) makes writes fail; the run goes on to stop its job.
  io.stderr.on?.('error', () => undefined);
  const interrupt = (signal: NodeJS.Signals) => {
    interrupts += 1;
    if (interrupts === 1) {
      io.stderr.write(`pidfence: ${signal}: stopping the job (TERM, then KILL after the grace period); ${signal === 'SIGHUP' ? 'signal' : 'press Ctrl-C'} again to KILL it now\n`);
      // The drain converges the run through the same processor; its result is then read back.
      void app.drain().then(() => finished?.({ kind: 'active' }));
      return;
    }
    const sent = app.escalate();
    io.stderr.write(`pidfence: ${signal} again: ${sent > 0 ? 'sent KILL to the job\'s process group' : 'the job\'s group is not held; waiting for the stop'}\n`);
  };
  for (const signal of RUN_STOP_SIGNALS) process.on(signal, interrupt);
  try {
    const admitted = await app.admit({
      // Under --json stdout is pidfence's one document: the job writes to stderr instead.
      projectId: options.project, command, args, stdio: options.json === true ? ['inherit', 2, 'inherit'] : 'inherit', env: io.env, ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
    if (admitted.kind !== 'admitted') {
      throw new PidfenceError(`the run was not admitted (${admitted.reason}): pidfence was already stopping, so nothing was started; run it again.`, 'ERR_PIDFENCE_RUN_REFUSED');
    }
    runId = admitted.runId;
    io.stderr.write(`pidfence: run ${runId} started (stop it with: ${stopHint(runId, options.db)})\n`);
    if (capabilities().groupSignalMode === 'unsupported') {
      io.stderr.write('pidfence: warning: this kernel or build cannot prove process identities, so neither --timeout nor cancel can stop this job; it runs to its own end.\n');
    }
    app.start();
    const report = runReportOf(runId, options.project, await completion);
    io.stderr.write(endLine(report));
    if (options.json === true) writeJson(io, report);
    return report.exitStatus;
  } finally {
    await app.drain();
    for (const signal of RUN_STOP_SIGNALS) process.removeListener(signal, interrupt);
  }
}

/** The signals that stop a foreground run; a second one escalates to KILL. */
export const RUN_STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export const runCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addStoreOptions(program.command('run'))
      .description('run a job in the foreground as its own process group; exit with its status')
      .option('--timeout <duration>', 'stop the job (TERM, then KILL after the grace) once this has passed, e.g. 30s, 5m')
      .option('--project <id>', 'the project the run belongs to', 'default')
      .option('--grace <duration>', 'TERM grace before KILL when the job is stopped', '5s')
      .argument('<command>', 'the program to run (no shell is involved)')
      .argument('[args...]', 'its arguments (put -- before the command)')
      .action(async (command: string, args: string[], options: RunOptions) => {
        done((await runAction(command, args, options, io)) as ExitCode);
      });
  },
};
