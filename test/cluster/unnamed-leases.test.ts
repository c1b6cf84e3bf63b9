// A pull whose answer never reached its worker (docs/decisions/0434): the control plane granted the
// runs to the worker's live session, the worker never heard of them, and no lease page would ever
// name them, so they stayed `running` while nothing ran (a 5,000-job bench found 82 such runs after
// a pull was sent again to another replica). Here a real `pidfence worker` holds its one slot with a
// job of its own; a second run is pulled under its session and certificate, and the answer dropped.
// The replica's lease page tells the worker of the lease it did not name, and the worker ends it
// `failed`, cause never_started: true of the processes, since it never started one.
import path from 'node:path';

import test from 'ava';

import { openSqliteStore } from '../../lib/store/sqlite/index';
import { until } from '../helpers/wait';
import { fleetWorld } from './fleet-world';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_unnamed_leases', 600_000);

/** Short, so the replica looks for unnamed leases once per lease (a tick of 200 ms is below half of it). */
const WORKER_LEASE_MS = 2_000;

test('cluster: a run granted by a pull whose answer the worker never got ends failed, never_started, within a few leases; the worker’s own job runs on', async (t) => {
  t.timeout(120_000);
  const { database, world: w } = await ready;
  const fleet = fleetWorld(t, database);
  const plane = await fleet.inProcessPlane({ workerLeaseMs: WORKER_LEASE_MS });
  const pem = fleet.certs.client('worker-un1');
  const journal = path.join(fleet.scratch, 'worker-un1.db');
  await fleet.worker(plane.url, pem, ['--journal', journal, '--capacity', '1']);
  const local = openSqliteStore(journal);
  t.teardown(() => local.close());

  // The worker's one slot: a job of its own, pulled and started the usual way.
  await w.leases.enqueueJob({ runId: 'run-un-own', projectId: 'project-un', argv: ['sleep', '60'] });
  await until(async () => (await local.runStore.getRun('run-un-own'))?.status === 'running', {
    timeoutMs: 30_000,
    what: 'the worker runs its own job',
  });

  // A second run, pulled under the worker's session and name; the answer is dropped, as a timed-out one is.
  const { rows } = await database.owner.query<{ id: string }>(
    'SELECT id FROM worker_sessions WHERE principal = $1 AND ended_at_ms IS NULL',
    ['worker-un1'],
  );
  t.is(rows.length, 1, 'the worker has one open session');
  await w.leases.enqueueJob({ runId: 'run-un-lost', projectId: 'project-un', argv: ['sleep', '60'] });
  const client = fleet.client(plane.url, pem);
  const pulled = await client.send<{ kind: string; assignments?: Array<{ runId: string }> }>(
    'POST',
    '/v1/assignments/pull',
    { sessionId: rows[0]?.id, max: 1 },
  );
  t.deepEqual(
    pulled.body.assignments?.map((assignment) => assignment.runId),
    ['run-un-lost'],
    'granted to the worker’s session',
  );

  await until(async () => (await w.runStore.getRun('run-un-lost'))?.status === 'failed', {
    timeoutMs: 8 * WORKER_LEASE_MS,
    what: 'the never-received run ends',
  });
  const terminal = (await w.runStore.listEvents('run-un-lost')).filter((event) => event.type === 'run.terminal');
  t.is(terminal.length, 1, 'one run.terminal event');
  t.like(terminal[0]?.payload, { status: 'failed' });
  const attemptEvents = await database.owner.query<{ payload: { cause?: string } }>(
    'SELECT payload FROM attempt_events WHERE run_id = $1',
    ['run-un-lost'],
  );
  t.deepEqual(
    attemptEvents.rows.map((row) => row.payload.cause),
    ['never_started'],
    'its attempt ended never_started',
  );
  t.is(await local.runStore.getRun('run-un-lost'), null, 'the worker never admitted it');
  t.like(await w.runStore.getRun('run-un-own'), { status: 'running' }, 'the worker’s own run is untouched');
  t.like(await local.runStore.getRun('run-un-own'), { status: 'running' });
});
