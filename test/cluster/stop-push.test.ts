// Stops pushed into the worker's own waiting lease page (docs/decisions/0201), with two
// control-plane replica processes and one `pidfence worker` on loopback: the replica holding the
// page is SIGKILLed, or every database connection of the replicas (the LISTEN one too) is cut, while
// the page waits; the cancel that follows reaches the job once through the next page, with one
// `run.cancel_dispatched`.
import { existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import type { Job } from '../helpers/processes';
import { until } from '../helpers/wait';
import { deliveredOnce, markerJob, pages, replicaPair, stage } from './push-stage';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_stop_push');

test.serial(
  "cluster: the replica holding the worker's waiting lease page is SIGKILLed; the cancel that follows reaches the job once through the other replica",
  async (t) => {
    t.timeout(120_000);
    const s = await stage(t, ready);
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
    const s = await stage(t, ready);
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

test.serial(
  'cluster: a cancel requested right after the worker got a stop is pushed into its next page at once, not left for its next tick',
  async (t) => {
    t.timeout(120_000);
    const { database, world } = await ready;
    // A tick far longer than any push: the second stop can only reach its job in time by a page that
    // waits again at once (docs/decisions/0397). Before, the worker's next page began a tick after the
    // last one, and a cancel requested in between waited for it.
    const TICK_MS = 8_000;
    const pair = await replicaPair(t, database, {
      name: 'again',
      tick: `${TICK_MS / 1000}s`,
      capacity: 2,
      workerLeaseMs: 3 * TICK_MS,
    });
    const jobs = ['first', 'second'].map((name) => ({
      runId: `run-again-${name}-${process.pid}`,
      marker: path.join(pair.scratch, `${name}.term`),
    }));
    for (const { runId, marker } of jobs)
      t.like(
        await pair.operator.send('POST', '/v1/jobs', { runId, projectId: pair.projectId, argv: markerJob(marker) }),
        {
          status: 200,
          body: { result: 'created' },
        },
      );
    for (const { runId } of jobs)
      await until(async () => (await world.runStore.getRun(runId))?.status === 'running', {
        what: `${runId} running`,
        timeoutMs: 30_000,
        intervalMs: 50,
      });
    const [first, second] = jobs as [(typeof jobs)[0], (typeof jobs)[0]];
    // Both leases are in a waiting page once a page that holds two leases has begun.
    const seen = pair.replicas.reduce((sum, replica) => sum + pages(replica), 0);
    await until(() => pair.replicas.reduce((sum, replica) => sum + pages(replica), 0) > seen, {
      what: 'a waiting page',
      timeoutMs: TICK_MS + 10_000,
      intervalMs: 5,
    });
    t.like(await pair.operator.send('POST', `/v1/runs/${first.runId}/cancel`), { status: 200 });
    await until(() => existsSync(first.marker), { what: 'the first job stopped', timeoutMs: TICK_MS / 2 });
    t.like(await pair.operator.send('POST', `/v1/runs/${second.runId}/cancel`), { status: 200 });
    await until(() => existsSync(second.marker), {
      what: 'the second job stopped before the next tick',
      timeoutMs: TICK_MS / 2,
    });
    for (const { runId } of jobs) {
      await until(async () => (await world.runStore.getRun(runId))?.status === 'cancelled', {
        what: `${runId} cancelled`,
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      t.deepEqual(await world.eventTypes(runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
    }
  },
);

test.serial(
  'cluster: a worker whose --tick is longer than a lease page may wait (12 s) still has its pages answered, and a cancel is pushed into one',
  async (t) => {
    t.timeout(120_000);
    const { database, world } = await ready;
    const pair = await replicaPair(t, database, { name: 'long', tick: '12s', workerLeaseMs: 36_000 });
    const marker = path.join(pair.scratch, 'long.term');
    const runId = `run-long-${process.pid}`;
    t.like(
      await pair.operator.send('POST', '/v1/jobs', { runId, projectId: pair.projectId, argv: markerJob(marker) }),
      {
        status: 200,
      },
    );
    await until(async () => (await world.runStore.getRun(runId))?.status === 'running', {
      what: `${runId} running`,
      timeoutMs: 40_000,
      intervalMs: 50,
    });
    // Before, the page asked to wait 12 s, above the 10 s the surface takes: every page was refused.
    const seen = pair.replicas.reduce((sum, replica) => sum + pages(replica), 0);
    await until(() => pair.replicas.reduce((sum, replica) => sum + pages(replica), 0) > seen, {
      what: 'a lease page answered',
      timeoutMs: 30_000,
      intervalMs: 5,
    });
    t.like(await pair.operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200 });
    await until(async () => (await world.runStore.getRun(runId))?.status === 'cancelled', {
      what: `${runId} cancelled`,
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    t.true(existsSync(marker), 'the job got TERM');
    t.deepEqual(await world.eventTypes(runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
  },
);
