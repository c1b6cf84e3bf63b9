// Stops pushed into the worker's own waiting lease page (docs/decisions/0201), with two
// control-plane replica processes and one `pidfence worker` on loopback: the replica holding the
// page is SIGKILLed, or every database connection of the replicas (the LISTEN one too) is cut, while
// the page waits; the cancel that follows reaches the job once through the next page, with one
// `run.cancel_dispatched`.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { signalVerified } from '../../lib/native/index';
import { PostgresDispatchRepository, PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { CLI } from '../execution/cli-runs';
import { makeCertificates } from '../helpers/certificates';
import { spawnJob, type Job } from '../helpers/processes';
import { until } from '../helpers/wait';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_stop_push');
const PROJECT = 'project-p';
let runs = 0;

const pages = (replica: Job): number => replica.lines.filter((line) => line.startsWith('observed bypass')).length;

function terminate(job: Job): Promise<unknown> {
  signalVerified(job.identity, 'SIGTERM', { group: false });
  return job.exited;
}

async function stage(t: ExecutionContext) {
  const { database, world } = await ready;
  const certs = makeCertificates();
  const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-push-'));
  t.teardown(() => {
    certs.remove();
    rmSync(scratch, { recursive: true, force: true });
  });
  for (const permission of ['run.read', 'run.stop'] as const)
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: 'operator-p', projectId: PROJECT, permission },
      'test-owner',
    );
  const replicas = [0, 1].map((i) =>
    spawnJob(t, process.execPath, [
      path.join(__dirname, 'replica-child.js'),
      database.runtimeUrl,
      certs.server.certPath,
      certs.server.keyPath,
      certs.ca.certPath,
      `cp-p${i}`,
      '3000',
      'none',
      path.join(scratch, 'latch'),
    ]),
  );
  const urls = await Promise.all(
    replicas.map(
      async (replica) =>
        (/listening on (\S+)/.exec(await replica.waitForLine(/listening on|error/, 20_000)) ?? [])[1] as string,
    ),
  );
  const pem = certs.client('worker-p');
  const worker = spawnJob(t, process.execPath, [
    CLI,
    'worker',
    '--control-plane',
    ...urls,
    '--cert',
    pem.certPath,
    '--key',
    pem.keyPath,
    '--ca',
    certs.ca.certPath,
    '--journal',
    path.join(scratch, 'worker.db'),
    '--capacity',
    '1',
    '--tick',
    '1s',
    '--grace',
    '5s',
  ]);
  await worker.waitForLine(/pidfence worker: ready/, 20_000);
  const operatorPem = certs.client('operator-p');
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
  const marker = (runId: string): string => path.join(scratch, `${runId}.term`);
  const runId = `run-p${++runs}-${process.pid}`;
  const job = [
    'sh',
    '-c',
    `trap 'echo term > ${marker(runId)}; exit 143' TERM; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
  t.like(await operator.send('POST', '/v1/jobs', { runId, projectId: PROJECT, argv: job }), {
    status: 200,
    body: { result: 'created' },
  });
  await until(async () => (await world.runStore.getRun(runId))?.status === 'running', {
    what: `${runId} running`,
    timeoutMs: 20_000,
    intervalMs: 50,
  });
  return { database, world, replicas, operator, runId, marker: marker(runId) };
}

async function deliveredOnce(t: ExecutionContext, s: Awaited<ReturnType<typeof stage>>): Promise<void> {
  // Right after its connections were cut a replica may answer 503 (store unavailable: try again), as
  // the code says; an operator retries, and so does this test, for at most 10 s.
  let answer = await s.operator.send('POST', `/v1/runs/${s.runId}/cancel`);
  for (let retry = 0; retry < 40 && answer.status === 503; retry++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    answer = await s.operator.send('POST', `/v1/runs/${s.runId}/cancel`);
  }
  t.like(answer, { status: 200, body: { result: 'requested' } });
  await until(async () => (await s.world.runStore.getRun(s.runId))?.status === 'cancelled', {
    what: `${s.runId} cancelled`,
    timeoutMs: 30_000,
    intervalMs: 50,
  });
  t.true(existsSync(s.marker), 'the job received TERM on the worker');
  t.deepEqual(await s.world.eventTypes(s.runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
  t.like(await new PostgresDispatchRepository(s.world.pool).getRecord(s.runId), {
    status: 'dispatched',
    lastResult: 'termination_requested',
    dispatchCount: 1,
  });
}

test.serial(
  "cluster: the replica holding the worker's waiting lease page is SIGKILLed; the cancel that follows reaches the job once through the other replica",
  async (t) => {
    t.timeout(120_000);
    const s = await stage(t);
    const [victim, survivor] = s.replicas as [Job, Job];
    // A page has just started waiting on the victim when its bypass line appears.
    const seen = pages(victim);
    await until(() => pages(victim) > seen, { what: 'a page at the victim', timeoutMs: 10_000, intervalMs: 5 });
    await victim.stop();
    await deliveredOnce(t, s);
    t.true(
      survivor.lines.some((line) => /^observed settled /.test(line)),
      'the survivor settled the stop',
    );
  },
);

test.serial(
  'cluster: every database connection of the replicas (the LISTEN one too) is cut while a page waits; the cancel still reaches the job once',
  async (t) => {
    t.timeout(120_000);
    const s = await stage(t);
    const [first] = s.replicas as [Job, Job];
    const seen = pages(first);
    await until(() => pages(first) > seen, { what: 'a page at a replica', timeoutMs: 10_000, intervalMs: 5 });
    const { rows } = await s.database.admin.query<{ cut: boolean }>(
      'SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity WHERE datname = current_database() AND usename = $1',
      [s.database.runtimeRole],
    );
    t.true(rows.length >= 2, "the replicas' pool and LISTEN connections were cut");
    await deliveredOnce(t, s);
  },
);
