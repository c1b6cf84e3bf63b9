// `pidfence supervise`: the long-lived runner of a store on this host (design/execution §4-5): readiness
// first (schema and migration checksums, store write access, native capabilities; any failure
// refuses to start with the reason), then startup recovery, which takes over the jobs of runners of
// this host that are proved gone (docs/decisions/0070), then the one control timer. It acts only on
// the jobs it owns. SIGTERM/SIGINT drain it; a failure while running (CYCLE_FAILURE_LIMIT failed
// cycles) drains it too, within its bound. It logs each stop it made (run id and result); with
// --json every line on stdout is one JSON event (docs/decisions/0141). With --metrics-port it serves
// /metrics and, on SQLite, the status page on loopback (docs/decisions/0110, 0111); prom-client is
// loaded only then.
import type { Command } from 'commander';

import { errorCategory } from '../../base/error-registry';
import { PidfenceError, PidfenceRangeError } from '../../base/errors';
import { OVERDUE_AFTER_DEFAULT_MS } from '../../contract/index';
import { createExecution, type ControlCycleReport } from '../../execution/index';
import { readExportedSummary } from '../../management/index';
import { capabilities } from '../../native/index';
import { addCgroupOption, applyCgroupOption, type CgroupOptions } from '../cgroup-option';
import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { GRACE_MS_MAX } from '../../process/index';
import { DURATION_HELP, parseDurationWithin } from '../duration';
import { openExecutionTarget, type ExecutionTarget } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJsonError, writeJsonLine } from '../output';
import { resolveStoreTarget, type StoreTarget } from '../store-target';
import { routeSignals, STOP_SIGNALS } from '../startup-signals';

interface SuperviseOptions extends StoreOptions, CgroupOptions {
  readonly profile: string;
  readonly grace: string;
  readonly metricsPort?: string;
  readonly metricsHost: string;
  readonly metricsProject: string[];
}

/** The metrics server of this supervise, when --metrics-port asked for one. */
interface MetricsServing {
  readonly observer: import('../../metrics/index').Metrics['observer'];
  readonly url: string;
  close(): Promise<void>;
}

function parseMetricsPort(text: string): number {
  const port = Number(text);
  if (!/^\d{1,5}$/.test(text) || port > 65_535)
    throw new PidfenceRangeError(
      '--metrics-port must be a port number from 0 to 65535 (0: any free port).',
      'ERR_PIDFENCE_INVALID_PORT',
    );
  return port;
}

/** Loads prom-client and the server only now; on a PostgreSQL store the status page is the control plane's. */
async function serveMetrics(
  options: SuperviseOptions,
  port: number,
  target: ExecutionTarget,
  storeTarget: StoreTarget,
): Promise<MetricsServing> {
  const { createMetrics } = await import('../../metrics/index');
  const { startLocalServer } = await import('../../web/local-server');
  const metrics = createMetrics({
    projects: options.metricsProject,
    overdueAfterMs: OVERDUE_AFTER_DEFAULT_MS,
    readProject: (projectId) => readExportedSummary(target.managementStore, projectId, OVERDUE_AFTER_DEFAULT_MS),
  });
  const server = await startLocalServer({
    host: options.metricsHost,
    port,
    metrics,
    management: storeTarget.kind === 'sqlite' ? target.managementStore : null,
  });
  return { observer: metrics.observer, url: server.url, close: () => server.close() };
}

/** The checks that need no store connection; the store's own (schema, checksums) run on open. */
function readinessRefusal(): string | null {
  const caps = capabilities();
  if (caps.groupSignalMode === 'unsupported')
    return 'this kernel or build cannot prove process identities (native capabilities: group signal unsupported); nothing could be stopped safely.';
  // A missing or unwritable store directory is the store's own one-sentence refusal (exit 3) on open.
  return null;
}

export const superviseCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    const supervise = addStoreOptions(program.command('supervise'))
      .description("run the store's runner: deadlines, cancellations, receipts and recovery, until SIGTERM/SIGINT")
      .option('--profile <name>', 'edge (5 s, 4 items) or standalone (1 s, 32 items)', 'standalone')
      .option('--grace <duration>', `TERM grace before KILL when a job is stopped: ${DURATION_HELP}`, '5s')
      .option('--metrics-port <n>', 'serve /metrics and the status page (/status) on this port (0: any free port)')
      .option('--metrics-host <address>', 'the address to serve them on', '127.0.0.1')
      .option('--metrics-project <id...>', 'the projects whose gauges /metrics exports', ['default']);
    addCgroupOption(supervise, 'swept').action(async (options: SuperviseOptions) => {
      done(await superviseAction(options, io));
    });
  },
};

/** What supervise holds once it is ready to run: the open store, and its metrics server when asked for. */
interface Supervision {
  readonly graceMs: number;
  readonly storeTarget: StoreTarget;
  readonly target: ExecutionTarget;
  readonly serving: MetricsServing | undefined;
}

/** Options, readiness, the store (schema and checksums are checked on open), then the metrics server. */
async function openSupervision(options: SuperviseOptions, io: CliIo): Promise<Supervision> {
  // Before the store is opened: a subtree that cannot be used changes nothing (docs/decisions/0301).
  applyCgroupOption(options);
  const graceMs = parseDurationWithin(options.grace, '--grace', GRACE_MS_MAX);
  const metricsPort = options.metricsPort === undefined ? undefined : parseMetricsPort(options.metricsPort);
  const storeTarget = resolveStoreTarget(options.db, io.env);
  const refusal = readinessRefusal();
  if (refusal !== null)
    throw new PidfenceError(`supervise refused to start: ${refusal}`, 'ERR_PIDFENCE_SUPERVISE_REFUSED');
  const target = await openExecutionTarget(storeTarget, io.env);
  try {
    const serving =
      metricsPort === undefined ? undefined : await serveMetrics(options, metricsPort, target, storeTarget);
    return { graceMs, storeTarget, target, serving };
  } catch (error) {
    await target.stores.close();
    throw error;
  }
}

function profileOf(name: string): 'edge' | 'standalone' {
  if (name === 'edge' || name === 'standalone') return name;
  throw new PidfenceError('--profile must be edge or standalone.', 'ERR_PIDFENCE_INVALID_PROFILE');
}

/** What the running supervise reports and waits on: completions counted, a fatal code, the wake-up of the drain. */
interface SuperviseState {
  completed: number;
  fatal: string | null;
  readonly stopped: Promise<void>;
  readonly wake: () => void;
}

function superviseState(): SuperviseState {
  let wake: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    wake = resolve;
  });
  return { completed: 0, fatal: null, stopped, wake: () => wake() };
}

/** The store's runner on this host: it adopts jobs whose runner is proved gone, and reports each stop it made. */
function superviseExecution(options: SuperviseOptions, io: CliIo, supervision: Supervision, state: SuperviseState) {
  const { target, serving } = supervision;
  const tty = (io.stderr as NodeJS.WriteStream).isTTY === true;
  // A woken cycle may leave the active page to the period: the line keeps the page last read.
  let active = '-';
  const status = (report: ControlCycleReport | null) => {
    if (!tty) return;
    if (report !== null && report.active !== null) active = String(report.active);
    io.stderr.write(
      `\rpidfence supervise [${options.profile}]: ${active} active on this page, ${state.completed} completed\x1b[K`,
    );
  };
  return createExecution({
    stores: target.stores,
    receiptDirectory: target.receiptDirectory,
    wakeDirectory: target.wakeDirectory,
    onWakeRefused: (error) => {
      io.stderr.write(`pidfence: ${error.message} (${error.code})\n`);
    },
    profile: profileOf(options.profile),
    graceMs: supervision.graceMs,
    runnerKind: 'supervise',
    adopt: true,
    env: io.env,
    keepAlive: true,
    onCycle: status,
    onCompleted: () => {
      state.completed += 1;
    },
    // Each stop it made, by run id and result (never a PID, command or handle).
    onStopped: (ref, result) => {
      if (options.json === true) writeJsonLine(io, { event: 'stopped', runId: ref.runId, result });
      else io.stdout.write(`pidfence supervise: stopped ${ref.runId} (${result})\n`);
    },
    onFatal: (code) => {
      state.fatal = code;
      state.wake();
    },
    ...(serving === undefined ? {} : { observer: serving.observer }),
  });
}

/** The start-up lines: what recovery found, where metrics are served, ready. --json: one document each (docs/decisions/0141). */
function announceStart(
  options: SuperviseOptions,
  io: CliIo,
  supervision: Supervision,
  recovered: { completed: number; running: number; unproven: number },
): void {
  const json = options.json === true;
  const { serving } = supervision;
  if (json)
    writeJsonLine(io, {
      event: 'recovered',
      completed: recovered.completed,
      running: recovered.running,
      unproven: recovered.unproven,
    });
  else if ((io.stderr as NodeJS.WriteStream).isTTY === true)
    io.stderr.write(
      `pidfence supervise: recovered ${recovered.completed} finished, ${recovered.running} running, ${recovered.unproven} unproven\n`,
    );
  if (serving !== undefined) {
    const status = supervision.storeTarget.kind === 'sqlite' ? `${serving.url}/status` : null;
    if (json) writeJsonLine(io, { event: 'serving', metrics: `${serving.url}/metrics`, status });
    else
      io.stdout.write(
        `pidfence supervise: metrics on ${serving.url}/metrics${status === null ? '' : `, status page on ${status}`}\n`,
      );
  }
  if (json) writeJsonLine(io, { event: 'ready', profile: options.profile });
  else io.stdout.write('pidfence supervise: ready\n');
}

/** The drain's last lines and the exit status: a fatal stop is the store's failure (exit 3). */
function drainedExit(
  options: SuperviseOptions,
  io: CliIo,
  report: { kind: string; converged: number; remaining: number },
  fatal: string | null,
): ExitCode {
  const json = options.json === true;
  if ((io.stderr as NodeJS.WriteStream).isTTY === true) io.stderr.write('\n');
  if (json)
    writeJsonLine(io, {
      event: 'drained',
      outcome: report.kind,
      converged: report.converged,
      remaining: report.remaining,
    });
  else
    io.stdout.write(
      `pidfence supervise: ${report.kind === 'drained' ? 'drained' : 'the drain timed out'} (${report.converged} converged, ${report.remaining} remaining)\n`,
    );
  if (fatal !== null) {
    const message = `supervise stopped after repeated failures (${fatal}); check the store, then start it again.`;
    if (json) writeJsonError(io, fatal, errorCategory(fatal), message);
    else io.stderr.write(`pidfence: ${message}\n`);
    return EXIT.storeUnavailable;
  }
  return report.kind === 'drained' ? EXIT.ok : EXIT.failure;
}

async function superviseAction(options: SuperviseOptions, io: CliIo): Promise<ExitCode> {
  const supervision = await openSupervision(options, io);
  const state = superviseState();
  const app = superviseExecution(options, io, supervision, state);
  let recovered;
  try {
    recovered = await app.recover();
  } catch (error) {
    await supervision.serving?.close();
    throw error;
  }
  // A signal held since start-up (docs/decisions/0162) wakes the drain at once; the first one gives
  // the signals back, so a second one ends the process as before.
  let release: (() => void) | undefined;
  release = routeSignals(STOP_SIGNALS.supervise, () => {
    release?.();
    release = undefined;
    state.wake();
  });
  app.start();
  announceStart(options, io, supervision, recovered);
  await state.stopped;
  release?.();
  // Stop answering before the store closes (design/execution §5: storage is closed last).
  await supervision.serving?.close();
  const report = await app.drain();
  return drainedExit(options, io, report, state.fatal);
}
