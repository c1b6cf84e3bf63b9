// `run`, `list`, `show` and `cancel` with --control-plane (docs/decisions/0243): the same verbs and
// answers as on a local store, through the control plane's HTTPS endpoints as the certificate's
// subject, under the same grants. `run` submits the job and, unless --detach, waits for its end and
// exits with its status; a first SIGINT/SIGTERM/SIGHUP asks its cancel, a second stops the wait.
import { randomUUID } from 'node:crypto';

import { errorCategory } from '../base/error-registry';
import { PidfenceError } from '../base/errors';
import { RUN_TERMINAL_STATUSES, validateId, type RunTerminalStatus } from '../contract/index';
import type { CompletionOutcome } from '../execution/index';
import type { RunDetail, RunListPage, ListRunsRequest } from '../management/index';
import type { ControlPlaneClient } from '../cluster/client';
import type { CliIo } from './command';
import { askControlPlane, withControlPlane, type ControlPlaneTarget } from './control-plane-target';
import { EXIT, type ExitCode } from './exit-codes';
import { writeJson } from './output';
import { runReportOf } from './run-report';
import { routeSignals, STOP_SIGNALS } from './startup-signals';

/** How often a waiting `run` reads its run back: often enough to end within a worker's tick. */
const WAIT_POLL_MS = 500;
/** What a shell reports for a command it interrupted: the wait was given up, not the run. */
const WAIT_INTERRUPTED_EXIT = 130;

export interface ClusterRunOptions {
  readonly project: string;
  readonly timeoutMs?: number;
  /** The run's name (docs/decisions/0251), validated by the caller. */
  readonly name?: string;
  readonly json?: boolean;
  readonly detach?: boolean;
  /** Opt-in (docs/decisions/0273): the worker stops the job after this long without a renewal. */
  readonly stopAfterDisconnectMs?: number;
}

/** The run's end as the local `run` reports it, so exit statuses and --json agree (docs/decisions/0141). */
export function outcomeOfDetail(run: RunDetail): CompletionOutcome {
  const status = run.status as RunTerminalStatus;
  if (run.exit === null) return { kind: 'terminal', status, lateReceipt: false };
  return {
    kind: 'completed',
    status,
    cause: run.exit.cause,
    exitCode: run.exit.exitCode,
    signal: run.exit.signal,
    startFailure: null,
  };
}

function stopHintOn(runId: string, target: ControlPlaneTarget): string {
  return `pidfence cancel ${runId} --control-plane ${target.url}`;
}

/** A read while waiting: a control plane briefly away is waited out; a refusal ends the wait. */
async function readRun(client: ControlPlaneClient, runId: string): Promise<RunDetail | null> {
  try {
    return await askControlPlane<RunDetail>(client, 'GET', `/v1/runs/${encodeURIComponent(runId)}`);
  } catch (error) {
    if (error instanceof PidfenceError && errorCategory(error.code) === 'unavailable') return null;
    throw error;
  }
}

async function waitForEnd(
  client: ControlPlaneClient,
  runId: string,
  target: ControlPlaneTarget,
  io: CliIo,
): Promise<RunDetail | null> {
  let interrupts = 0;
  let stopWaiting: () => void = () => undefined;
  const stopped = new Promise<null>((resolve) => {
    stopWaiting = () => resolve(null);
  });
  const release = routeSignals(STOP_SIGNALS.run, (signal) => {
    interrupts += 1;
    if (interrupts > 1) {
      io.stderr.write(
        `pidfence: ${signal} again: no longer waiting; the cancel stands (${stopHintOn(runId, target)} to ask again)\n`,
      );
      stopWaiting();
      return;
    }
    io.stderr.write(
      `pidfence: ${signal}: asking the cancel of ${runId}; its worker stops the job (${signal} again to stop waiting)\n`,
    );
    void askControlPlane(client, 'POST', `/v1/runs/${encodeURIComponent(runId)}/cancel`).catch(
      (error: Error & { code?: string }) => {
        io.stderr.write(
          `pidfence: the cancel was not recorded: ${error.message} (${error.code ?? 'ERR_PIDFENCE_CLUSTER_REPLY'})\n`,
        );
      },
    );
  });
  try {
    for (;;) {
      const run = await readRun(client, runId);
      if (run !== null && (RUN_TERMINAL_STATUSES as readonly string[]).includes(run.status)) return run;
      const next = await Promise.race([
        new Promise<'poll'>((resolve) => setTimeout(() => resolve('poll'), WAIT_POLL_MS)),
        stopped,
      ]);
      if (next === null) return null;
    }
  } finally {
    release();
  }
}

/** `pidfence run --control-plane URL -- cmd args…`: submits the job; waits for its end unless --detach. */
export async function runOnCluster(
  target: ControlPlaneTarget,
  argv: readonly string[],
  options: ClusterRunOptions,
  io: CliIo,
): Promise<number> {
  const projectId = validateId(options.project, '--project');
  const runId = `run-${randomUUID()}`;
  return withControlPlane(target, async (client) => {
    await askControlPlane(client, 'POST', '/v1/jobs', {
      runId,
      projectId,
      argv,
      ...(options.name === undefined ? {} : { name: options.name }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.stopAfterDisconnectMs === undefined ? {} : { stopAfterDisconnectMs: options.stopAfterDisconnectMs }),
    });
    io.stderr.write(`pidfence: run ${runId} queued on ${target.url} (stop it with: ${stopHintOn(runId, target)})\n`);
    if (options.detach === true) {
      if (options.json === true) writeJson(io, { runId, projectId, status: 'queued' });
      else io.stdout.write(`${runId}\n`);
      return EXIT.ok;
    }
    const run = await waitForEnd(client, runId, target, io);
    if (run === null) return WAIT_INTERRUPTED_EXIT;
    const report = runReportOf(runId, options.name ?? null, projectId, outcomeOfDetail(run));
    io.stderr.write(`pidfence: run ${runId} ${run.status}\n`);
    if (options.json === true) writeJson(io, report);
    return report.exitStatus;
  });
}

export function listOnCluster(target: ControlPlaneTarget, request: ListRunsRequest): Promise<RunListPage> {
  const query = new URLSearchParams();
  if (request.state !== undefined) query.set('state', request.state);
  if (request.cursor !== undefined) query.set('cursor', request.cursor);
  if (request.limit !== undefined) query.set('limit', String(request.limit));
  const search = query.size === 0 ? '' : `?${query.toString()}`;
  return withControlPlane(target, (client) =>
    askControlPlane<RunListPage>(client, 'GET', `/v1/projects/${encodeURIComponent(request.projectId)}/runs${search}`),
  );
}

export function showOnCluster(target: ControlPlaneTarget, runId: string): Promise<RunDetail> {
  return withControlPlane(target, (client) =>
    askControlPlane<RunDetail>(client, 'GET', `/v1/runs/${encodeURIComponent(validateId(runId, 'RUN'))}`),
  );
}

/** `pidfence cancel RUN --control-plane URL`: the durable intent, recorded by the control plane; the run's worker stops the job. */
export async function cancelOnCluster(
  target: ControlPlaneTarget,
  runIdText: string,
  json: boolean | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const runId = validateId(runIdText, 'RUN');
  const answer = await withControlPlane(target, (client) =>
    askControlPlane<{ result: string; run?: string }>(client, 'POST', `/v1/runs/${encodeURIComponent(runId)}/cancel`),
  );
  if (answer.result === 'run_terminal')
    throw new PidfenceError(`run ${runId} has already finished; nothing to cancel.`, 'ERR_PIDFENCE_RUN_FINISHED');
  if (json === true)
    writeJson(io, { runId, result: answer.result, ...(answer.run === undefined ? {} : { status: answer.run }) });
  else if (answer.run === 'cancelled')
    io.stdout.write(`cancel requested for ${runId}; no worker had pulled it, so it ended cancelled at once\n`);
  else if (answer.result === 'already_requested')
    io.stdout.write(`${runId} already has a cancel request; kept as it is\n`);
  else io.stdout.write(`cancel requested for ${runId}; the worker that runs it stops the job at its next tick\n`);
  return EXIT.ok;
}
