// Two control-plane replica processes and one `pidfence worker` on loopback (design/cluster §D3,
// docs/decisions/0101), as the replica and stop-push tests stage them; for the stop-push tests
// (docs/decisions/0201) one real job whose TERM trap writes a marker file, and the check that a
// cancel reached that job exactly once.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { signalVerified } from '../../lib/native/index';
import { PostgresDispatchRepository, PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { CLI } from '../execution/cli-runs';
import { makeCertificates, tlsFlags } from '../helpers/certificates';
import { spawnJob, type Job } from '../helpers/processes';
import { until } from '../helpers/wait';
import type { MigratedDatabase } from '../helpers/pg-store';
import type { clusterFixture } from './world';

type ClusterReady = ReturnType<typeof clusterFixture>;

let runs = 0;

/** Where the first replica to claim a stop parks its tick (replica-child.ts). */
export type Hold = 'none' | 'after-claim' | 'after-settle' | 'after-claim-until-released';

export interface PairOptions {
  /** Tells the files' principals apart: replicas cp-<name>0/1, worker-<name>, operator-<name>, project-<name>. */
  readonly name: string;
  readonly hold?: Hold;
  /** The replicas' dispatch lease (3 s by default). */
  readonly dispatchLeaseMs?: number;
  /** The worker's --tick. */
  readonly tick: string;
  /** The replicas' worker lease (15 s by default): above two ticks (docs/decisions/0430). */
  readonly workerLeaseMs?: number;
  /** The worker's --capacity (1 by default: each cycle one page). */
  readonly capacity?: number;
}

type Certificates = ReturnType<typeof makeCertificates>;

/** A replica pair with its worker and an operator allowed run.read and run.stop on the project. */
export interface ReplicaPair {
  readonly replicas: Job[];
  readonly worker: Job;
  readonly operator: ControlPlaneClient;
  readonly projectId: string;
  readonly scratch: string;
  /** Lets a replica parked at `after-claim-until-released` go on. */
  release(): void;
}

export function terminate(job: Job): Promise<unknown> {
  signalVerified(job.identity, 'SIGTERM', { group: false });
  return job.exited;
}

/** How many lease pages started waiting at the replica so far (its `bypass` observations). */
export const pages = (replica: Job): number =>
  replica.lines.filter((line) => line.startsWith('observed bypass')).length;

/** The two replica processes, and the URL each listens on. */
async function startReplicas(
  t: ExecutionContext,
  runtimeUrl: string,
  certs: Certificates,
  latch: string,
  options: PairOptions,
): Promise<{ readonly replicas: Job[]; readonly urls: string[] }> {
  const replicas = [0, 1].map((i) =>
    spawnJob(t, process.execPath, [
      path.join(__dirname, 'replica-child.js'),
      runtimeUrl,
      certs.server.certPath,
      certs.server.keyPath,
      certs.ca.certPath,
      `cp-${options.name}${i}`,
      String(options.dispatchLeaseMs ?? 3_000),
      options.hold ?? 'none',
      latch,
      String(options.workerLeaseMs ?? 15_000),
    ]),
  );
  const urls = await Promise.all(
    replicas.map(
      async (replica) =>
        (/listening on (\S+)/.exec(await replica.waitForLine(/listening on|error/, 20_000)) ?? [])[1] as string,
    ),
  );
  return { replicas, urls };
}

/** One `pidfence worker` on both replicas, capacity 1 unless asked; resolves once it is ready. */
async function startWorker(
  t: ExecutionContext,
  urls: readonly string[],
  certs: Certificates,
  scratch: string,
  options: PairOptions,
): Promise<Job> {
  const pem = certs.client(`worker-${options.name}`);
  const worker = spawnJob(t, process.execPath, [
    CLI,
    'worker',
    '--control-plane',
    ...urls,
    ...tlsFlags(pem, certs.ca),
    '--journal',
    path.join(scratch, 'worker.db'),
    '--capacity',
    String(options.capacity ?? 1),
    '--tick',
    options.tick,
    '--grace',
    '5s',
  ]);
  await worker.waitForLine(/pidfence worker: ready/, 20_000);
  return worker;
}

/** Two replica processes on the database, one `pidfence worker` on both, and an operator client. */
export async function replicaPair(
  t: ExecutionContext,
  database: MigratedDatabase,
  options: PairOptions,
): Promise<ReplicaPair> {
  const certs = makeCertificates();
  const scratch = mkdtempSync(path.join(tmpdir(), `pidfence-pair-${options.name}-`));
  t.teardown(() => {
    certs.remove();
    rmSync(scratch, { recursive: true, force: true });
  });
  const projectId = `project-${options.name}`;
  // A cancel needs run.read (seeing the run) and run.stop, over HTTP as from the CLI (docs/decisions/0043, 0224).
  for (const permission of ['run.read', 'run.stop'] as const)
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: `operator-${options.name}`, projectId, permission },
      'test-owner',
    );
  const latch = path.join(scratch, 'hold.latch');
  const { replicas, urls } = await startReplicas(t, database.runtimeUrl, certs, latch, options);
  const worker = await startWorker(t, urls, certs, scratch, options);
  const operatorPem = certs.client(`operator-${options.name}`);
  const operator = new ControlPlaneClient(urls[1] as string, {
    cert: operatorPem.cert,
    key: operatorPem.key,
    ca: certs.ca.cert,
  });
  t.teardown(async () => {
    operator.close();
    await Promise.all(
      [worker, ...replicas]
        .filter((job) => job.child.exitCode === null && job.child.signalCode === null)
        .map(terminate),
    );
  });
  const release = (): void => writeFileSync(`${latch}.release`, '');
  return { replicas, worker, operator, projectId, scratch, release };
}

/** A job that writes `marker` on TERM (then runs `afterTerm`), bounded to a minute even if nothing stops it. */
export function markerJob(marker: string, afterTerm = ''): string[] {
  return [
    'sh',
    '-c',
    `trap 'echo term > ${marker}; ${afterTerm} exit 143' TERM; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
}

/** The stop-push stage: a replica pair with a 1 s tick and one running job with a TERM marker. */
export async function stage(
  t: ExecutionContext,
  ready: ClusterReady,
  options: { readonly hold?: Hold; readonly dispatchLeaseMs?: number } = {},
) {
  const { database, world } = await ready;
  const pair = await replicaPair(t, database, { name: 'p', tick: '1s', ...options });
  const marker = path.join(pair.scratch, 'job.term');
  const runId = `run-p${++runs}-${process.pid}`;
  t.like(await pair.operator.send('POST', '/v1/jobs', { runId, projectId: pair.projectId, argv: markerJob(marker) }), {
    status: 200,
    body: { result: 'created' },
  });
  await until(async () => (await world.runStore.getRun(runId))?.status === 'running', {
    what: `${runId} running`,
    timeoutMs: 20_000,
    intervalMs: 50,
  });
  return { ...pair, database, world, runId, marker };
}

export type Stage = Awaited<ReturnType<typeof stage>>;

/** Requests the cancel; checks first that no stop reached the job before it. */
export async function cancelRequested(t: ExecutionContext, s: Stage): Promise<void> {
  t.false(existsSync(s.marker), 'no stop reached the job before the cancel');
  // Right after its connections were cut (or its server restarted) a replica may answer 503 (store
  // unavailable: try again), as the code says; an operator retries, and so does this test, for at most 10 s.
  let answer = await s.operator.send('POST', `/v1/runs/${s.runId}/cancel`);
  let retried = 0;
  for (; retried < 40 && answer.status === 503; retried++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    answer = await s.operator.send('POST', `/v1/runs/${s.runId}/cancel`);
  }
  t.like(answer, { status: 200, body: { result: 'requested' } });
  if (retried > 0) t.log(`the cancel was answered 503 ${retried} times first`);
}

/**
 * Checks the requested cancel reached the job once: the run `cancelled`, TERM received, exactly one
 * `run.cancel_dispatched`, one dispatch, the worker still up.
 */
export async function reachedOnce(t: ExecutionContext, s: Stage): Promise<void> {
  await until(async () => (await s.world.runStore.getRun(s.runId))?.status === 'cancelled', {
    what: `${s.runId} cancelled`,
    timeoutMs: 30_000,
    intervalMs: 50,
    retryErrors: true,
  });
  t.true(existsSync(s.marker), 'the job received TERM on the worker');
  t.deepEqual(await s.world.eventTypes(s.runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
  t.like(await new PostgresDispatchRepository(s.world.pool).getRecord(s.runId), {
    status: 'dispatched',
    lastResult: 'termination_requested',
    dispatchCount: 1,
  });
  t.true(s.worker.child.exitCode === null && s.worker.child.signalCode === null, 'the worker stayed up');
}

/** The cancel, requested and checked to reach the job once. */
export async function deliveredOnce(t: ExecutionContext, s: Stage): Promise<void> {
  await cancelRequested(t, s);
  await reachedOnce(t, s);
}
