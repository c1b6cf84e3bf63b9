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
import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { GRACE_MS_MAX } from '../../process/index';
import { parseDurationWithin } from '../duration';
import { openExecutionTarget, type ExecutionTarget } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJsonError, writeJsonLine } from '../output';
import { resolveStoreTarget, type StoreTarget } from '../store-target';

interface SuperviseOptions extends StoreOptions {
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
  if (!/^\d{1,5}$/.test(text) || port > 65_535) throw new PidfenceRangeError('--metrics-port must be a port number from 0 to 65535 (0: any free port).', 'ERR_PIDFENCE_INVALID_PORT');
  return port;
}

/** Loads prom-client and the server only now; on a PostgreSQL store the status page is the control plane's. */
async function serveMetrics(options: SuperviseOptions, port: number, target: ExecutionTarget, storeTarget: StoreTarget): Promise<MetricsServing> {
  const { createMetrics } = await import('../../metrics/index');
  const { startLocalServer } = await import('../../web/local-server');
  const metrics = createMetrics({
    projects: options.metricsProject, overdueAfterMs: OVERDUE_AFTER_DEFAULT_MS,
    readProject: (projectId) => readExportedSummary(target.managementStore, projectId, OVERDUE_AFTER_DEFAULT_MS),
  });
  const server = await startLocalServer({ host: options.metricsHost, port, metrics, management: storeTarget.kind === 'sqlite' ? target.managementStore : null });
  return { observer: metrics.observer, url: server.url, close: () => server.close() };
}

/** The checks that need no store connection; the store's own (schema, checksums) run on open. */
function readinessRefusal(): string | null {
  const caps = capabilities();
  if (caps.groupSignalMode === 'unsupported') return 'this kernel or build cannot prove process identities (native capabilities: group signal unsupported); nothing could be stopped safely.';
  // A missing or unwritable store directory is the store's own one-sentence refusal (exit 3) on open.
  return null;
}

export const superviseCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addStoreOptions(program.command('supervise'))
      .description('run the store\'s runner: deadlines, cancellations, receipts and recovery, until SIGTERM/SIGINT')
      .option('--profile <name>', 'edge (5 s, 4 items) or standalone (1 s, 32 items)', 'standalone')
      .option('--grace <duration>', 'TERM grace before KILL when a job is stopped', '5s')
      .option('--metrics-port <n>', 'serve /metrics and the status page (/status) on this port (0: any free port)')
      .option('--metrics-host <address>', 'the address to serve them on', '127.0.0.1')
      .option('--metrics-project <id...>', 'the projects whose gauges /metrics exports', ['default'])
      .action(async (options: SuperviseOptions) => {
        done(await superviseAction(options, io));
      });
  },
};

async function superviseAction(options: SuperviseOptions, io: CliIo): Promise<ExitCode> {
  const graceMs = parseDurationWithin(options.grace, '--grace', GRACE_MS_MAX);
  const metricsPort = options.metricsPort === undefined ? undefined : parseMetricsPort(options.metricsPort);
  const storeTarget = resolveStoreTarget(options.db, io.env);
  const refusal = readinessRefusal();
  if (refusal !== null) throw new PidfenceError(`supervise refused to start: ${refusal}`, 'ERR_PIDFENCE_SUPERVISE_REFUSED');
  // Schema version and migration checksums: the store refuses to open when they disagree.
  const target = await openExecutionTarget(storeTarget, io.env);
  let serving: MetricsServing | undefined;
  try {
    serving = metricsPort === undefined ? undefined : await serveMetrics(options, metricsPort, target, storeTarget);
  } catch (error) {
    await target.stores.close();
    throw error;
  }
  const tty = (io.stderr as NodeJS.WriteStream).isTTY === true;
  // --json: stdout is a stream of one-line JSON documents, one per event (docs/decisions/0141).
  const json = options.json === true;
  let completed = 0;
  let fatal: string | null = null;
  let wake: (() => void) | undefined;
  const stopped = new Promise<void>((resolve) => { wake = resolve; });
  const status = (report: ControlCycleReport | null) => {
    if (!tty) return;
    const active = report === null ? '-' : String(report.active);
    io.stderr.write(`\rpidfence supervise [${options.profile}]: ${active} active on this page, ${completed} completed\x1b[K`);
  };
  const app = createExecution({
    stores: target.stores,
    receiptDirectory: target.receiptDirectory,
    profile: options.profile === 'edge' ? 'edge' : options.profile === 'standalone' ? 'standalone' : (() => { throw new PidfenceError('--profile must be edge or standalone.', 'ERR_PIDFENCE_INVALID_PROFILE'); })(),
    graceMs,
    runnerKind: 'supervise',
    // The store's runner on this host: it takes over jobs whose runner is proved gone.
    adopt: true,
    env: io.env,
    keepAlive: true,
    onCycle: status,
    onCompleted: () => { completed += 1; },
    // Each stop it made, by run id and result (never a PID, command or handle).
    onStopped: (ref, result) => {
      if (json) writeJsonLine(io, { event: 'stopped', runId: ref.runId, result });
      else io.stdout.write(`pidfence supervise: stopped ${ref.runId} (${result})\n`);
    },
    onFatal: (code) => { fatal = code; wake?.(); },
    ...(serving === undefined ? {} : { observer: serving.observer }),
  });
  let recovered;
  try {
    recovered = await app.recover();
  } catch (error) {
    await serving?.close();
    throw error;
  }
  if (json) writeJsonLine(io, { event: 'recovered', completed: recovered.completed, running: recovered.running, unproven: recovered.unproven });
  else if (tty) io.stderr.write(`pidfence supervise: recovered ${recovered.completed} finished, ${recovered.running} running, ${recovered.unproven} unproven\n`);
  const onSignal = () => wake?.();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  app.start();
  if (serving !== undefined) {
    const status = storeTarget.kind === 'sqlite' ? `${serving.url}/status` : null;
    if (json) writeJsonLine(io, { event: 'serving', metrics: `${serving.url}/metrics`, status });
    else io.stdout.write(`pidfence supervise: metrics on ${serving.url}/metrics${status === null ? '' : `, status page on ${status}`}\n`);
  }
  if (json) writeJsonLine(io, { event: 'ready', profile: options.profile });
  else io.stdout.write('pidfence supervise: ready\n');
  await stopped;
  process.removeListener('SIGTERM', onSignal);
  process.removeListener('SIGINT', onSignal);
  // Stop answering before the store closes (design/execution §5: storage is closed last).
  await serving?.close();
  const report = await app.drain();
  if (tty) io.stderr.write('\n');
  if (json) writeJsonLine(io, { event: 'drained', outcome: report.kind, converged: report.converged, remaining: report.remaining });
  else io.stdout.write(`pidfence supervise: drain ${report.kind} (${report.converged} converged, ${report.remaining} remaining)\n`);
  if (fatal !== null) {
    const message = `supervise stopped after repeated failures (${fatal as string}); check the store, then start it again.`;
    if (json) writeJsonError(io, fatal, errorCategory(fatal), message);
    else io.stderr.write(`pidfence: ${message}\n`);
    return EXIT.storeUnavailable;
  }
  return report.kind === 'drained' ? EXIT.ok : EXIT.failure;
}
