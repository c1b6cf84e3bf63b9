// Issue 28, second actor (docs/decisions/0190; design/postgres §D3): a remote worker host's wall clock
// steps +1 day (the clock-step shim on `pidfence worker`; the control plane and the machine keep
// theirs). Worker leases and task timeouts are on the database clock and the worker ticks on a
// monotonic timer, so nothing changes: its lease is renewed (the run stays running past several
// lease lengths), a task timeout fires on time, and a cancel reaches the job once, settled first.
// (−1 day is left out: the worker checks the control plane's certificate against its own clock, and
// a certificate made a moment ago is not yet valid a day earlier. That is TLS's rule, not pidfence's.)
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { signalVerified } from '../../lib/native/index';
import { PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { CLI } from '../execution/cli-runs';
import { clockStep, DAY_MS } from '../helpers/clock-step';
import { makeCertificates, tlsFlags } from '../helpers/certificates';
import { spawnJob, type Job } from '../helpers/processes';
import { delay, until } from '../helpers/wait';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_clock');
const WORKER_LEASE_MS = 2_000;

/** Records TERM in `marker`; ends by itself only after about a minute. */
function markingJob(marker: string): string[] {
  return [
    'sh',
    '-c',
    `trap 'echo term > ${marker}; exit 143' TERM; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
}

function terminate(job: Job): Promise<unknown> {
  signalVerified(job.identity, 'SIGTERM', { group: false });
  return job.exited;
}

test.serial(
  'cluster, worker clock +1 day: its lease is renewed, a task timeout fires on time, a cancel is settled and reaches the job once',
  async (t) => {
    t.timeout(120_000);
    const { database, world } = await ready;
    const certs = makeCertificates();
    const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-clock-worker-'));
    t.teardown(() => {
      certs.remove();
      rmSync(scratch, { recursive: true, force: true });
    });
    const operatorPem = certs.client('operator-clock');
    // A cancel needs run.read and run.stop on the run's project, over HTTP as from the CLI (docs/decisions/0224).
    for (const permission of ['run.read', 'run.stop'] as const)
      await new PostgresGrantAdministration(database.owner).writeGrant(
        { subject: 'operator-clock', projectId: 'project-clock', permission },
        'test-owner',
      );
    const plane = spawnJob(t, process.execPath, [
      CLI,
      'control-plane',
      '--db',
      database.runtimeUrl,
      ...tlsFlags(certs.server, certs.ca),
      '--port',
      '0',
      '--worker-lease',
      `${WORKER_LEASE_MS}ms`,
      '--replica-id',
      'cp-clock',
    ]);
    const url = (/listening on (\S+)/.exec(await plane.waitForLine(/listening on/, 20_000)) ?? [])[1] as string;
    const clock = clockStep(t);
    const pem = certs.client('worker-clock');
    const env = Object.entries(clock.env)
      .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
      .join(' ');
    const worker = spawnJob(t, 'sh', [
      '-c',
      `${env} exec "$0" "$@"`,
      process.execPath,
      CLI,
      'worker',
      '--control-plane',
      url,
      ...tlsFlags(pem, certs.ca),
      '--journal',
      path.join(scratch, 'worker.db'),
      '--tick',
      '200ms',
      '--grace',
      '1s',
    ]);
    await worker.waitForLine(/pidfence worker: ready/, 20_000);
    const operator = new ControlPlaneClient(url, { cert: operatorPem.cert, key: operatorPem.key, ca: certs.ca.cert });
    t.teardown(() => operator.close());

    const marker = (runId: string) => path.join(scratch, `${runId}.term`);
    const statusOf = async (runId: string) => (await world.runStore.getRun(runId))?.status;
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'clk-cancel',
        projectId: 'project-clock',
        argv: markingJob(marker('clk-cancel')),
      }),
      { status: 200 },
    );
    await until(async () => (await statusOf('clk-cancel')) === 'running', {
      what: 'clk-cancel running',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    clock.step(DAY_MS);
    const timedStart = performance.now();
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'clk-timeout',
        projectId: 'project-clock',
        argv: markingJob(marker('clk-timeout')),
        timeoutMs: 4_000,
      }),
      { status: 200 },
    );
    // Three worker-lease lengths on the stepped clock: renewed all along, so still running.
    await delay(3 * WORKER_LEASE_MS);
    t.is(await statusOf('clk-cancel'), 'running', 'the stepped worker kept its lease');
    t.false(existsSync(marker('clk-cancel')));
    await until(async () => (await statusOf('clk-timeout')) === 'timed_out', {
      what: 'clk-timeout timed out',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    const timedOutAfter = performance.now() - timedStart;
    t.true(timedOutAfter >= 3_500, `the task timeout waited its 4 s (${Math.round(timedOutAfter)} ms)`);
    t.true(existsSync(marker('clk-timeout')), 'the job received TERM on its worker');

    t.like(await operator.send('POST', '/v1/runs/clk-cancel/cancel'), { status: 200, body: { result: 'requested' } });
    await until(async () => (await statusOf('clk-cancel')) === 'cancelled', {
      what: 'clk-cancel cancelled',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.true(existsSync(marker('clk-cancel')));
    t.deepEqual(await world.eventTypes('clk-cancel'), [
      'run.cancel_requested',
      'run.cancel_dispatched',
      'run.terminal',
    ]);
    await Promise.all([worker, plane].map(terminate));
  },
);
