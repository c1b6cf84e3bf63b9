// `pidfence control-plane`: one replica of the cluster control plane (docs/decisions/0102): HTTPS
// with TLS 1.3 and required client certificates of --ca, on the PostgreSQL store of --db (the
// runtime role). SIGTERM/SIGINT: stop accepting, drain in-flight requests, close the pool. SIGHUP:
// read --cert, --key, --ca and --crl again and use them for new connections (docs/decisions/0242).
import type { Command } from 'commander';

import { PidfenceError } from '../../base/errors';
import { validatePostgresUrl } from '../../store/postgres/connection-string';
import type { CliCommand, CliIo } from '../command';
import { DURATION_HELP, parseDuration } from '../duration';
import { EXIT, type ExitCode } from '../exit-codes';
import { readTrustFiles, reloadOnHangup, untilSignal } from '../pem';

interface ControlPlaneCliOptions {
  readonly db?: string;
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly crl?: string;
  readonly host: string;
  readonly port: string;
  readonly workerLease: string;
  readonly replicaId?: string;
  readonly metrics?: boolean;
  readonly metricsProject?: string[];
}

export const controlPlaneCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    program
      .command('control-plane')
      .description('serve the cluster control plane over HTTPS with client certificates, until SIGTERM/SIGINT')
      .option('--db <url>', 'postgres:// URL of the runtime role (default: $PIDFENCE_DB)')
      .requiredOption('--cert <file>', 'server certificate (PEM)')
      .requiredOption('--key <file>', 'server key (PEM)')
      .requiredOption('--ca <file>', 'the CA that signs worker and operator certificates (PEM)')
      .option(
        '--crl <file>',
        'revocation lists of that CA (PEM); a listed client certificate is refused (SIGHUP reloads)',
      )
      .option('--host <address>', 'listen address', '127.0.0.1')
      .option('--port <n>', 'listen port (0: any free port)', '8443')
      .option('--worker-lease <duration>', `the workers' run-dispatch lease: ${DURATION_HELP}`, '15s')
      .option('--replica-id <id>', "this replica's stable owner id (default: cp-<uuid> per process)")
      .option('--metrics', 'serve GET /metrics (Prometheus text) to any certificate of --ca')
      .option('--metrics-project <id...>', 'the projects whose gauges /metrics exports (implies --metrics)')
      .action(async (options: ControlPlaneCliOptions) => {
        done(await controlPlaneAction(options, io));
      });
  },
};

async function controlPlaneAction(options: ControlPlaneCliOptions, io: CliIo): Promise<ExitCode> {
  const databaseUrl = options.db ?? io.env.PIDFENCE_DB ?? '';
  if (!/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new PidfenceError(
      'the control plane needs a PostgreSQL store: pass --db postgres://… (or set PIDFENCE_DB).',
      'ERR_PIDFENCE_CLUSTER_CONFIG',
    );
  }
  validatePostgresUrl(databaseUrl);
  const port = Number(options.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new PidfenceError('--port must be an integer from 0 to 65535.', 'ERR_PIDFENCE_CLUSTER_CONFIG');
  const readTls = () => readTrustFiles(options);
  const tls = readTls();
  const { startControlPlane } = await import('../../cluster/index');
  const plane = await startControlPlane({
    databaseUrl,
    tls,
    host: options.host,
    port,
    workerLeaseMs: parseDuration(options.workerLease, '--worker-lease'),
    ...(options.replicaId === undefined ? {} : { replicaOwnerId: options.replicaId }),
    ...(options.metrics === true || options.metricsProject !== undefined
      ? { metrics: { projects: options.metricsProject ?? [] } }
      : {}),
  });
  io.stdout.write(`pidfence control-plane: listening on ${plane.url} (status page ${plane.url}/status)\n`);
  const stopReloading = reloadOnHangup(
    () => plane.reloadTls(readTls()),
    (line) => io.stdout.write(`pidfence control-plane: ${line}\n`),
  );
  await untilSignal();
  stopReloading();
  await plane.close();
  io.stdout.write('pidfence control-plane: closed\n');
  return EXIT.ok;
}
