// A real cluster for the operator's tests (docs/decisions/0240-0245): `pidfence control-plane` and
// `pidfence worker` processes with openssl certificates on one migrated PostgreSQL database, the
// `pidfence` CLI run as a child with the operator's certificate, grants written by the owner.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from '../../lib/cluster/control-plane';
import { signalVerified } from '../../lib/native/index';
import { PostgresGrantAdministration } from '../../lib/store/postgres/index';
import type { Permission } from '../../lib/contract/index';
import { CLI } from '../execution/cli-runs';
import { makeCertificates, type Certificates, type Pem, tlsFlags } from '../helpers/certificates';
import type { MigratedDatabase } from '../helpers/pg-store';
import { spawnJob, type Job } from '../helpers/processes';

export interface CliAnswer {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface FleetWorld {
  readonly certs: Certificates;
  readonly scratch: string;
  /** Starts `pidfence control-plane` and waits for its URL. */
  plane(args?: readonly string[]): Promise<{ readonly job: Job; readonly url: string }>;
  /**
   * Starts `pidfence worker` under certificate `pem` and waits until it is ready; `node` adds node
   * options (a test preload) and environment before the CLI.
   */
  /** The arguments after `node` of a `pidfence worker` under `pem` (a later `--journal` in `args` wins). */
  workerArgv(url: string, pem: Pem, args?: readonly string[]): string[];
  worker(
    url: string,
    pem: Pem,
    args?: readonly string[],
    node?: { readonly options: readonly string[]; readonly env: NodeJS.ProcessEnv },
  ): Promise<Job>;
  /** `pidfence ARGS` as the operator `pem`, with $PIDFENCE_CERT/KEY/CA set to it (and extra env). */
  cli(pem: Pem, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<CliAnswer>;
  /** A grant written by the migration owner. */
  grant(subject: string, scope: string, permission: Permission): Promise<void>;
  /** A control plane in this process on the fleet's certificates and a free port, closed after the test. */
  inProcessPlane(options?: Partial<ControlPlaneOptions>): Promise<ControlPlane>;
  /** A client of `url` under certificate `pem`, closed after the test. */
  client(url: string, pem: Pem): ControlPlaneClient;
}

export function fleetWorld(t: ExecutionContext, database: MigratedDatabase): FleetWorld {
  const certs = makeCertificates();
  const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-fleet-'));
  t.teardown(() => {
    certs.remove();
    rmSync(scratch, { recursive: true, force: true });
  });
  let workers = 0;
  const workerArgv = (url: string, pem: Pem, args: readonly string[] = []): string[] => [
    CLI,
    'worker',
    '--control-plane',
    url,
    ...tlsFlags(pem, certs.ca),
    '--journal',
    path.join(scratch, `worker-${++workers}.db`),
    '--tick',
    '200ms',
    '--grace',
    '2s',
    ...args,
  ];
  return {
    certs,
    scratch,
    inProcessPlane: async (options = {}) => {
      const plane = await startControlPlane({
        databaseUrl: database.runtimeUrl,
        tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert },
        port: 0,
        ...options,
      });
      t.teardown(() => plane.close());
      return plane;
    },
    client: (url, pem) => {
      const client = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: certs.ca.cert });
      t.teardown(() => client.close());
      return client;
    },
    plane: async (args = []) => {
      const job = spawnJob(t, process.execPath, [
        CLI,
        'control-plane',
        '--db',
        database.runtimeUrl,
        ...tlsFlags(certs.server, certs.ca),
        '--port',
        '0',
        ...args,
      ]);
      t.teardown(() => stopGently(job));
      const line = await job.waitForLine(/listening on/, 20_000);
      return { job, url: (/listening on (\S+)/.exec(line) ?? [])[1] as string };
    },
    workerArgv,
    worker: async (url, pem, args = [], node) => {
      const command = [...(node?.options ?? []), ...workerArgv(url, pem, args)];
      const job = spawnJob(
        t,
        process.execPath,
        command,
        node === undefined ? {} : { env: { ...process.env, ...node.env } },
      );
      t.teardown(() => stopGently(job));
      await job.waitForLine(/pidfence worker: ready/, 20_000);
      return job;
    },
    cli: (pem, args, env = {}) =>
      new Promise((resolve) => {
        execFile(
          process.execPath,
          [CLI, ...args],
          {
            env: {
              ...process.env,
              PIDFENCE_CERT: pem.certPath,
              PIDFENCE_KEY: pem.keyPath,
              PIDFENCE_CA: certs.ca.certPath,
              ...env,
            },
            timeout: 30_000,
            encoding: 'utf8',
          },
          (error, stdout, stderr) =>
            resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
        );
      }),
    grant: (subject, scope, permission) =>
      new PostgresGrantAdministration(database.owner)
        .writeGrant({ subject, projectId: scope, permission }, 'test-owner')
        .then(() => undefined),
  };
}

/** SIGTERM through the verified path (the command drains), then its end; a second call is harmless. */
export async function stopGently(job: Job): Promise<void> {
  if (job.child.exitCode === null && job.child.signalCode === null)
    signalVerified(job.identity, 'SIGTERM', { group: false });
  const ended = await Promise.race([
    job.exited.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 15_000)),
  ]);
  if (!ended) await job.stop();
}

/** Sends SIGHUP to a control plane or worker and waits for its answer line. */
export async function hangUp(job: Job, who: 'control-plane' | 'worker'): Promise<string> {
  const before = job.lines.length;
  signalVerified(job.identity, 'SIGHUP', { group: false });
  const pattern = new RegExp(`^pidfence ${who}: certificates (not )?reloaded`);
  for (let waited = 0; waited < 10_000; waited += 50) {
    const line = job.lines.slice(before).find((candidate) => pattern.test(candidate));
    if (line !== undefined) return line;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${who} did not answer SIGHUP; lines: ${JSON.stringify(job.lines.slice(before))}`);
}

/** `GET /v1/runs/:id` as the client's principal; anything but 200 throws. */
export async function runOf<T>(client: ControlPlaneClient, runId: string): Promise<T> {
  const reply = await client.send<T>('GET', `/v1/runs/${runId}`);
  if (reply.status !== 200) throw new Error(`GET run: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

/** SIGKILL to the worker process only (not its group): its jobs' launchers live on, as after a crash. */
export async function killNine(job: Job): Promise<void> {
  signalVerified(job.identity, 'SIGKILL', { group: false });
  await job.exited;
}

/** A job that writes `term` to `marker` on TERM and ends by itself after about a minute. */
export function markingJob(marker: string): string[] {
  return [
    'sh',
    '-c',
    `trap 'echo term > ${marker}; exit 143' TERM; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
}
