// `pidfence worker`: a remote worker (docs/decisions/0103): pulls jobs from the control planes of
// --control-plane (several: it alternates), runs them here with the execution lifecycle on the
// local SQLite journal --journal, and ticks lease control. SIGTERM/SIGINT drain it.
import type { Command } from 'commander';

import type { CliCommand, CliIo } from '../command';
import { parseDuration } from '../duration';
import { EXIT, type ExitCode } from '../exit-codes';
import { readPem, untilSignal } from './control-plane';

interface WorkerCliOptions {
  readonly controlPlane: string[];
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly journal: string;
  readonly capacity: string;
  readonly tick: string;
  readonly grace: string;
}

export const workerCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    program.command('worker')
      .description('pull jobs from the control plane and run them on this host, until SIGTERM/SIGINT')
      .requiredOption('--control-plane <url...>', 'https:// URL of each control-plane replica')
      .requiredOption('--cert <file>', 'this worker\'s client certificate (PEM); its CN is the principal')
      .requiredOption('--key <file>', 'this worker\'s key (PEM)')
      .requiredOption('--ca <file>', 'the CA of the control plane\'s certificate (PEM)')
      .option('--journal <file>', 'the local SQLite journal', './pidfence-worker.db')
      .option('--capacity <n>', 'jobs at once', '4')
      .option('--tick <duration>', 'lease-control cadence', '1s')
      .option('--grace <duration>', 'TERM grace before KILL when a job is stopped', '5s')
      .action(async (options: WorkerCliOptions) => {
        done(await workerAction(options, io));
      });
  },
};

async function workerAction(options: WorkerCliOptions, io: CliIo): Promise<ExitCode> {
  const tls = { cert: readPem(options.cert, '--cert'), key: readPem(options.key, '--key'), ca: readPem(options.ca, '--ca') };
  const { startWorker } = await import('../../cluster/worker');
  const worker = await startWorker({
    controlPlaneUrls: options.controlPlane, tls, journalFile: options.journal,
    capacity: Number(options.capacity), tickMs: parseDuration(options.tick, '--tick'), graceMs: parseDuration(options.grace, '--grace'),
  });
  io.stdout.write('pidfence worker: ready\n');
  await untilSignal();
  await worker.close();
  io.stdout.write('pidfence worker: drained\n');
  return EXIT.ok;
}
