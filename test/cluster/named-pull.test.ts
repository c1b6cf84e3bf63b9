// A pull is answered once (docs/decisions/0437). The worker names each pull. When a pull's answer
// times out, the replica set sends the same request to the next replica. That replica used to grant
// a second page, and the first page's runs ended never_started without ever running (decision 0434
// made that true, but the runs were lost to their users). Now the name finds what the first answer
// granted. Two replicas' lease stores on one real PostgreSQL database, and a real control plane.
import { randomUUID } from 'node:crypto';

import { Pool } from 'pg';
import test, { type ExecutionContext } from 'ava';

import { ClusterLeaseStore, type WorkerCaller } from '../../lib/cluster/index';
import { PostgresExecutionStore, type PullPageOutcome } from '../../lib/store/postgres/index';
import { fleetWorld } from './fleet-world';
import { clusterFixture, LEASE_MS, type ClusterWorld } from './world';

const ready = clusterFixture('cluster_named_pull');

/** A second replica: its own pool and lease store on the same database. */
function otherReplica(t: ExecutionContext, runtimeUrl: string): ClusterLeaseStore {
  const pool = new Pool({ connectionString: runtimeUrl, max: 2 });
  pool.on('error', () => undefined);
  t.teardown(() => pool.end());
  return new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: LEASE_MS });
}

/** `count` queued jobs and a fresh session of `principal`; the queue holds only this test's jobs. */
async function queuedFor(
  w: ClusterWorld,
  principal: string,
  count: number,
): Promise<{ readonly caller: WorkerCaller; readonly runIds: string[] }> {
  const runIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const runId = `run-${randomUUID()}`;
    runIds.push(runId);
    await w.leases.enqueueJob({ runId, projectId: 'project-np', argv: ['sleep', '30'] });
  }
  return { caller: { principal, sessionId: await w.leases.registerSession(principal) }, runIds };
}

/** The next test's pulls find only its own jobs: this test's queued ones get a cancel intent (no pull takes those). */
async function leaveNoneQueued(w: ClusterWorld, runIds: readonly string[]): Promise<void> {
  for (const runId of runIds) if ((await w.runStore.getRun(runId))?.status === 'queued') await w.cancel(runId);
}

function granted(outcome: PullPageOutcome): string[] {
  return outcome.kind === 'assigned' ? outcome.assignments.map((assignment) => assignment.runId) : [];
}

async function statuses(w: ClusterWorld, runIds: readonly string[]): Promise<string[]> {
  return Promise.all(runIds.map(async (runId) => (await w.runStore.getRun(runId))?.status ?? 'missing'));
}

async function leasesOfSession(w: ClusterWorld, sessionId: string): Promise<number> {
  const { rows } = await w.pool.query<{ n: number }>(
    'SELECT count(*)::integer AS n FROM run_dispatch_leases WHERE session_id = $1',
    [sessionId],
  );
  return rows[0]?.n ?? -1;
}

test.serial(
  'cluster: a pull sent again under its name to another replica gets what the first answer granted and grants nothing new; a new name pulls on; a lease ended since is not answered again',
  async (t) => {
    const { database, world: w } = await ready;
    const other = otherReplica(t, database.runtimeUrl);
    const { caller, runIds } = await queuedFor(w, 'CN=worker-np1', 3);

    const first = await w.leases.pullPage(caller, 2, 'pull-np1-a');
    const again = await other.pullPage(caller, 2, 'pull-np1-a');
    t.deepEqual(granted(first), runIds.slice(0, 2));
    t.deepEqual(again, first, 'the same assignments: attempt, fence, argv, expiry and deadline');
    t.is(await leasesOfSession(w, caller.sessionId), 2, 'two leases, not four');
    t.deepEqual(await statuses(w, runIds), ['running', 'running', 'queued']);

    t.deepEqual(granted(await other.pullPage(caller, 2, 'pull-np1-b')), runIds.slice(2), 'a new name pulls on');
    if (first.kind !== 'assigned') throw new Error('nothing granted');
    const ended = first.assignments[0];
    if (ended === undefined) throw new Error('no first assignment');
    await w.leases.complete(caller, {
      ...ended,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
    });
    t.deepEqual(
      granted(await other.pullPage(caller, 2, 'pull-np1-a')),
      runIds.slice(1, 2),
      'only the lease still open',
    );
  },
);

test.serial(
  'cluster: the same named pull answered by two replicas at once grants one page: both answers name the same leases',
  async (t) => {
    const { database, world: w } = await ready;
    const other = otherReplica(t, database.runtimeUrl);
    const { caller, runIds } = await queuedFor(w, 'CN=worker-np2', 4);
    const [one, two] = await Promise.all([
      w.leases.pullPage(caller, 2, 'pull-np2'),
      other.pullPage(caller, 2, 'pull-np2'),
    ]);
    t.deepEqual(granted(one), runIds.slice(0, 2));
    t.deepEqual(two, one);
    t.is(await leasesOfSession(w, caller.sessionId), 2);
    t.deepEqual(await statuses(w, runIds), ['running', 'running', 'queued', 'queued']);
    await leaveNoneQueued(w, runIds);
  },
);

test.serial('cluster: a malformed pull name is refused with a typed error and grants nothing', async (t) => {
  const { world: w } = await ready;
  const { caller, runIds } = await queuedFor(w, 'CN=worker-np3', 1);
  for (const bad of ['', 'has space', 'x'.repeat(129), 7 as unknown as string]) {
    await t.throwsAsync(w.leases.pullPage(caller, 1, bad), { code: 'ERR_PIDFENCE_INVALID_ID' });
  }
  t.deepEqual(await statuses(w, runIds), ['queued']);
  t.is(await leasesOfSession(w, caller.sessionId), 0);
  await leaveNoneQueued(w, runIds);
});

test.serial(
  'cluster: POST /v1/assignments/pull with a pullId, sent twice, is answered the same page twice; a bad pullId is a 400 that grants nothing',
  async (t) => {
    t.timeout(60_000);
    const { database, world: w } = await ready;
    const fleet = fleetWorld(t, database);
    const plane = await fleet.inProcessPlane();
    const client = fleet.client(plane.url, fleet.certs.client('worker-np4'));
    const registered = await client.send<{ sessionId: string }>('POST', '/v1/sessions', {});
    const { runIds } = await queuedFor(w, 'CN=worker-np4-jobs', 3);
    const body = { sessionId: registered.body.sessionId, max: 2, pullId: 'pull-np4' };

    const bad = await client.send<{ code?: string }>('POST', '/v1/assignments/pull', { ...body, pullId: 'no spaces' });
    t.is(bad.status, 400);
    t.deepEqual(await statuses(w, runIds), ['queued', 'queued', 'queued'], 'the bad pull granted nothing');
    const first = await client.send<PullPageOutcome>('POST', '/v1/assignments/pull', body);
    const again = await client.send<PullPageOutcome>('POST', '/v1/assignments/pull', body);
    t.is(first.status, 200);
    t.deepEqual(granted(first.body), runIds.slice(0, 2));
    t.deepEqual(again.body, first.body);
    t.deepEqual(await statuses(w, runIds), ['running', 'running', 'queued']);
  },
);
