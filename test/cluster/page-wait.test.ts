// A waiting lease page misses no cancel (docs/decisions/0438). The page reads its leases, and when
// nothing but renewals is due it waits for a cancel's NOTIFY. A cancel committed after the read and
// before the wait began was announced to no one: the page waited out its whole wait and answered
// renewals, and the stop came a page later (the bench's single cancels over 1 s with 1 s pages).
// Here a real control plane on a real PostgreSQL database is held inside that window by a lock the
// test takes on a run row the page must write after its read (the mark of an unreachable lease,
// docs/decisions/0270), and the cancel commits meanwhile.
import { Client } from 'pg';
import test from 'ava';

import { until } from '../helpers/wait';
import { fleetWorld } from './fleet-world';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_page_wait');

const WAIT_MS = 4_000;

test.serial(
  'cluster: a cancel committed while a waiting lease page is between its read and its wait is answered by that page, not left to its timeout',
  async (t) => {
    t.timeout(60_000);
    const { database, world: w } = await ready;
    const fleet = fleetWorld(t, database);
    const plane = await fleet.inProcessPlane();
    const worker = fleet.client(plane.url, fleet.certs.client('worker-pw'));
    const { caller, refs } = await w.holding(2, 'worker-pw');
    const [marked, cancelled] = refs as [(typeof refs)[0], (typeof refs)[0]];
    // Both leases marked unreachable: the page renews them and then clears each mark under its run's lock.
    await database.owner.query('UPDATE worker_sessions SET expires_at_ms = 1 WHERE id = $1', [caller.sessionId]);
    while ((await w.leases.reapExpired()) > 0);
    t.deepEqual(await w.eventTypes(marked.runId), ['run.unreachable'], 'precondition: the lease is marked');

    const holder = new Client({ connectionString: database.ownerUrl });
    await holder.connect();
    t.teardown(() => holder.end().catch(() => undefined));
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM runs WHERE id = $1 FOR UPDATE', [marked.runId]);
    const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;

    const page = worker.send<{ answers: Array<{ runId: string; kind: string }> }>(
      'POST',
      '/v1/workers/leases',
      {
        sessionId: caller.sessionId,
        leases: refs.map(({ runId, attemptId, fence }) => ({ runId, attemptId, fence })),
        waitMs: WAIT_MS,
      },
      WAIT_MS + 20_000,
    );
    // The page has read its leases (no stop due) and waits for the run lock to clear the mark.
    await until(
      async () =>
        (
          await database.admin.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
            [holderPid],
          )
        ).rowCount! >= 1,
      { what: 'the page waiting on the run lock', timeoutMs: 15_000, intervalMs: 5 },
    );
    await w.cancel(cancelled.runId);
    await holder.query('COMMIT');

    const reply = await page;
    t.is(reply.status, 200);
    t.like(
      reply.body.answers.find((answer) => answer.runId === cancelled.runId),
      { kind: 'stop_requested' },
      'the cancel committed before the page began to wait is in its answer',
    );
    t.deepEqual(await w.eventTypes(marked.runId), ['run.unreachable', 'run.reattached']);
  },
);
