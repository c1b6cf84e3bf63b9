// Two control-plane replicas and one `pidfence worker` on loopback (design/cluster §D3, §D4;
// docs/decisions/0101): the worker's ticks alternate between the replicas and a cancel is dispatched
// once; a replica SIGKILLed inside its stop tick, after the claim or after the settlement, never
// leaves a stop released without its settlement, and the other replica settles or replays it once.
import { existsSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import type { ControlPlaneClient } from '../../lib/cluster/client';
import { PostgresDispatchRepository } from '../../lib/store/postgres/index';
import type { Job } from '../helpers/processes';
import { delay, until } from '../helpers/wait';
import { markerJob, replicaPair, type Hold } from './push-stage';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_replicas');
/** The parked replica's dispatch lease: how long the survivor must fail closed before it may take over. */
const DISPATCH_LEASE_MS = 3_000;
let runs = 0;

interface Stage {
  readonly replicas: readonly Job[];
  readonly worker: Job;
  readonly operator: ControlPlaneClient;
  readonly marker: (runId: string) => string;
  readonly statusOf: (runId: string) => Promise<string | undefined>;
  readonly eventTypes: (runId: string) => Promise<string[]>;
  readonly record: (runId: string) => Promise<unknown>;
  /** Enqueues a job that writes its marker on TERM, `afterTerm` later exits; waits until it runs and both replicas renewed its lease. */
  running(afterTerm: string): Promise<string>;
}

/** Wrapper observations a replica printed, as `kind code` strings. */
function observed(replica: Job): string[] {
  return replica.lines
    .filter((line) => line.startsWith('observed '))
    .map((line) => line.split(' ').slice(1, 3).join(' '));
}

/** Two replicas (`hold`: where the first one to claim parks its stop tick) and one worker with capacity 1, so every cycle is one tick and consecutive ticks alternate. */
async function stage(t: ExecutionContext, hold: Hold): Promise<Stage> {
  const { database, world } = await ready;
  const { replicas, worker, operator, projectId, scratch } = await replicaPair(t, database, {
    name: 'r',
    hold,
    dispatchLeaseMs: DISPATCH_LEASE_MS,
    tick: '100ms',
  });
  const marker = (runId: string): string => path.join(scratch, `${runId}.term`);
  const statusOf = async (runId: string) => (await world.runStore.getRun(runId))?.status;
  return {
    replicas,
    worker,
    operator,
    marker,
    statusOf,
    eventTypes: (runId) => world.eventTypes(runId),
    record: (runId) => new PostgresDispatchRepository(world.pool).getRecord(runId),
    running: async (afterTerm) => {
      const runId = `run-r${++runs}-${process.pid}`;
      t.like(await operator.send('POST', '/v1/jobs', { runId, projectId, argv: markerJob(marker(runId), afterTerm) }), {
        status: 200,
        body: { result: 'created' },
      });
      await until(async () => (await statusOf(runId)) === 'running', {
        what: `${runId} running`,
        timeoutMs: 20_000,
        intervalMs: 50,
      });
      // The worker alternates: both replicas have renewed this lease before the cancel.
      const before = replicas.map((replica) => observed(replica).length);
      await until(() => replicas.every((replica, i) => observed(replica).length > (before[i] ?? 0) + 1), {
        what: 'renewals at both replicas',
        timeoutMs: 10_000,
      });
      return runId;
    },
  };
}

/** A running job is cancelled; the replica whose stop tick parked at `point` is SIGKILLed there (verified, its group). */
async function cancelAndKillTheHolder(
  t: ExecutionContext,
  point: 'after-claim' | 'after-settle',
): Promise<{ s: Stage; runId: string; survivor: Job }> {
  const s = await stage(t, point);
  const runId = await s.running('');
  t.like(await s.operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200, body: { result: 'requested' } });
  const held = await Promise.race(
    s.replicas.map((replica) => replica.waitForLine(new RegExp(`^held ${point}$`), 15_000).then(() => replica)),
  );
  await held.stop();
  return { s, runId, survivor: s.replicas.find((replica) => replica !== held) as Job };
}

test.serial(
  'cluster: a worker ticking alternately at both replicas gets exactly one run.cancel_dispatched: one replica settles, and the stopping lease is not named again',
  async (t) => {
    t.timeout(90_000);
    const s = await stage(t, 'none');
    // The job takes a second to exit after TERM; the worker names a stopping lease no more (docs/decisions/0200).
    const runId = await s.running('sleep 1;');
    t.true(
      s.replicas.every((replica) => observed(replica).includes('bypass -')),
      'renewals reached both replicas',
    );
    t.like(await s.operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200, body: { result: 'requested' } });
    await until(async () => (await s.statusOf(runId)) === 'cancelled', {
      what: `${runId} cancelled`,
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    t.true(existsSync(s.marker(runId)), 'the job received TERM on the worker');
    t.deepEqual(await s.eventTypes(runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
    t.like(await s.record(runId), { status: 'dispatched', lastResult: 'termination_requested', dispatchCount: 1 });
    const stops = s.replicas.map((replica) => observed(replica).filter((line) => /^(settled|replayed) /.test(line)));
    t.is(stops.flat().filter((line) => line.startsWith('settled')).length, 1, 'one replica settled the stop, once');
    t.is(stops.flat().length, 1, `the stop was answered once: ${JSON.stringify(stops)}`);
    t.false(s.replicas.some((replica) => observed(replica).some((line) => line.startsWith('failed_closed'))));
  },
);

test.serial(
  "cluster: a replica SIGKILLed inside its stop tick after the claim releases no stop; the worker gets none until the other replica settles it, once, after the dead replica's dispatch lease",
  async (t) => {
    t.timeout(90_000);
    const { s, runId, survivor } = await cancelAndKillTheHolder(t, 'after-claim');
    const killedAt = Date.now();
    t.like(await s.record(runId), { status: 'leased', lastResult: null, dispatchCount: 1 });
    t.deepEqual(await s.eventTypes(runId), ['run.cancel_requested']);

    // The worker retries its tick at the survivor, which finds the dead replica's live dispatch lease.
    await until(() => observed(survivor).includes('failed_closed ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED'), {
      what: 'the survivor failed closed',
      timeoutMs: 10_000,
    });
    while (Date.now() - killedAt < DISPATCH_LEASE_MS - 1_000) {
      t.false(existsSync(s.marker(runId)), 'no stop reached the job while the dispatch was unsettled');
      await delay(100);
    }
    t.like(await s.record(runId), { status: 'leased', lastResult: null });
    t.is(await s.statusOf(runId), 'running');

    await until(async () => (await s.statusOf(runId)) === 'cancelled', {
      what: `${runId} cancelled`,
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    t.true(existsSync(s.marker(runId)));
    t.deepEqual(await s.eventTypes(runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
    t.like(await s.record(runId), { status: 'dispatched', lastResult: 'termination_requested', dispatchCount: 2 });
    t.is(
      observed(survivor).filter((line) => line.startsWith('settled')).length,
      1,
      'the survivor settled it once, after the takeover',
    );
  },
);

test.serial(
  'cluster: a replica SIGKILLed after its settlement committed but before it answered: the other replica replays the same stop, with no second event',
  async (t) => {
    t.timeout(90_000);
    const { s, runId, survivor } = await cancelAndKillTheHolder(t, 'after-settle');
    t.false(existsSync(s.marker(runId)), 'the dead replica released nothing');
    t.like(await s.record(runId), { status: 'dispatched', lastResult: 'termination_requested', dispatchCount: 1 });
    await until(async () => (await s.statusOf(runId)) === 'cancelled', {
      what: `${runId} cancelled`,
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    t.true(existsSync(s.marker(runId)));
    t.deepEqual(await s.eventTypes(runId), ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
    t.true(observed(survivor).some((line) => line.startsWith('replayed')));
    t.false(observed(survivor).some((line) => line.startsWith('settled')));
  },
);
