// `pidfence worker`: a remote worker (docs/decisions/0103): pulls jobs from the control planes of
// --control-plane (several: it alternates), runs them here with the execution lifecycle on the
// local SQLite journal --journal, and ticks lease control. SIGTERM/SIGINT drain it; SIGHUP reads its
// certificates again (docs/decisions/0242). `pidfence worker cordon|drain|uncordon|revoke|reinstate
// NAME` are the operator's acts on a worker (docs/decisions/0240, 0241), through a control plane.
import type { Command } from 'commander';

import { validateWorkerName, WORKER_ACTIONS, type WorkerAction, type WorkerActionOutcome } from '../../contract/index';
import { writeAnswer, type CliCommand, type CliIo } from '../command';
import {
  addControlPlaneOptions,
  askControlPlane,
  fleetControlPlane,
  withControlPlane,
  type ControlPlaneOptions,
} from '../control-plane-target';
import { DURATION_HELP, parseDuration } from '../duration';
import { EXIT, type ExitCode } from '../exit-codes';
import { JOB_NICE_MAX, validateJobNice } from '../../execution/index';
import { readTrustFiles, reloadOnHangup, untilSignal } from '../pem';
import { packageVersion } from '../version';

interface WorkerCliOptions {
  readonly controlPlane: string[];
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly crl?: string;
  readonly journal: string;
  readonly capacity: string;
  readonly tick: string;
  readonly grace: string;
  readonly jobNice: string;
}

/** `--job-nice 10`: a whole number of nice steps; anything else is refused with the text given. */
function parseJobNice(text: string): number {
  return validateJobNice(/^\d{1,2}$/.test(text.trim()) ? Number(text.trim()) : text);
}

/** What each act does, for its help line and its answer. */
const ACT_TEXT: Readonly<Record<WorkerAction, string>> = {
  cordon: 'no new work for the worker; what it runs goes on (like kubectl cordon)',
  drain: 'no new work, and every run it holds is asked to stop (like kubectl drain); it is drained once it holds none',
  uncordon: 'take work again: ends a cordon or a drain',
  revoke: 'refuse every request of this name at once and end its sessions; it pulls no more work',
  reinstate: 'lift a revocation',
  forget:
    "declare the worker's host gone (like deleting a node): its unreachable runs end failed, cause forgotten, and a late report of it is refused",
};

export function actText(outcome: WorkerActionOutcome): string {
  const stops = outcome.stopsRequested === undefined ? '' : `; ${outcome.stopsRequested} run(s) asked to stop now`;
  if (outcome.runsForgotten !== undefined) {
    return `worker ${outcome.name}: forgotten (forget: ${outcome.outcome === 'changed' ? 'done' : 'nothing held'}); ${outcome.runsForgotten} run(s) ended failed, cause forgotten; ${outcome.sessionsEnded ?? 0} session(s) ended\n`;
  }
  return `worker ${outcome.name}: ${outcome.state} (${outcome.action}: ${outcome.outcome === 'changed' ? 'done' : 'it was already so'}, revision ${outcome.revision})${stops}\n`;
}

function registerActs(worker: Command, io: CliIo, done: (code: ExitCode) => void): void {
  for (const action of WORKER_ACTIONS) {
    addControlPlaneOptions(
      worker.command(action).description(`${ACT_TEXT[action]} (needs worker.manage on @cluster; audited)`),
      true,
    )
      .argument('<name>', 'the worker: the subject CN of its certificate, as `pidfence workers` lists it')
      .option('--json', 'machine-readable output')
      .action(async (name: string, options: ControlPlaneOptions & { json?: boolean }) => {
        const target = fleetControlPlane(options, io.env);
        validateWorkerName(name);
        const outcome = await withControlPlane(target, (client) =>
          askControlPlane<WorkerActionOutcome>(client, 'POST', `/v1/workers/${encodeURIComponent(name)}/${action}`),
        );
        writeAnswer(io, options.json, outcome, actText);
        done(EXIT.ok);
      });
  }
}

export const workerCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    const worker = program
      .command('worker')
      .description(
        'run a worker (pidfence worker --control-plane …), or act on one: cordon, drain, uncordon, revoke, reinstate',
      );
    worker
      .command('serve', { isDefault: true })
      .description('pull jobs from the control plane and run them on this host, until SIGTERM/SIGINT (the default)')
      .requiredOption('--control-plane <url...>', 'https:// URL of each control-plane replica')
      .requiredOption('--cert <file>', "this worker's client certificate (PEM); its CN is the principal")
      .requiredOption('--key <file>', "this worker's key (PEM)")
      .requiredOption('--ca <file>', "the CA of the control plane's certificate (PEM)")
      .option(
        '--crl <file>',
        "revocation lists the control plane's certificate is checked against (PEM; SIGHUP reloads)",
      )
      .option('--journal <file>', 'the local SQLite journal', './pidfence-worker.db')
      .option('--capacity <n>', 'jobs at once', '4')
      .option(
        '--tick <duration>',
        `lease-control cadence, below half the control plane's --worker-lease (checked at start): ${DURATION_HELP}`,
        '1s',
      )
      .option('--grace <duration>', `TERM grace before KILL when a job is stopped: ${DURATION_HELP}`, '5s')
      .option(
        '--job-nice <n>',
        `run jobs this much nicer than the worker (0-${JOB_NICE_MAX}), so they yield the CPU to other work`,
        '0',
      )
      .action(async (options: WorkerCliOptions) => {
        done(await workerAction(options, io));
      });
    registerActs(worker, io, done);
  },
};

async function workerAction(options: WorkerCliOptions, io: CliIo): Promise<ExitCode> {
  const jobNice = parseJobNice(options.jobNice); // bad input is refused before a file is read
  const readTls = () => readTrustFiles(options);
  const { startWorker } = await import('../../cluster/worker');
  const worker = await startWorker({
    controlPlaneUrls: options.controlPlane,
    tls: readTls(),
    journalFile: options.journal,
    version: packageVersion(),
    capacity: Number(options.capacity),
    tickMs: parseDuration(options.tick, '--tick'),
    graceMs: parseDuration(options.grace, '--grace'),
    jobNice,
    observe: ({ what }) => {
      if (what === 'revoked')
        io.stdout.write(
          'pidfence worker: the control plane refuses this worker as revoked; it pulls no more work and keeps the jobs it runs\n',
        );
    },
  });
  io.stdout.write('pidfence worker: ready\n');
  const stopReloading = reloadOnHangup(
    () => worker.reloadTls(readTls()),
    (line) => io.stdout.write(`pidfence worker: ${line}\n`),
  );
  await untilSignal();
  stopReloading();
  await worker.close();
  io.stdout.write('pidfence worker: drained\n');
  return EXIT.ok;
}
