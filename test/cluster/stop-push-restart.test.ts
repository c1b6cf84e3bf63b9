// Stops pushed into the worker's own waiting lease page (docs/decisions/0201) across a real
// PostgreSQL restart (pg_ctl restart, fast) of a throw-away cluster, with two control-plane replica
// processes and one `pidfence worker` on loopback: the server restarts while a page waits at a
// replica, or after the cancel was requested and a replica claimed its dispatch but before it
// settled it; either way the stop reaches the job once, with one `run.cancel_dispatched`.
import test from 'ava';

import type { Job } from '../helpers/processes';
import { clusterInit, clusterRestart, clusterStart } from '../helpers/pg-cluster';
import { scalar } from '../helpers/pg-pool';
import { until } from '../helpers/wait';
import { cancelRequested, deliveredOnce, pages, reachedOnce, stage, type Stage } from './push-stage';
import { clusterFixture, LEASE_MS } from './world';

const server = clusterInit({ label: 'push-restart' }).then(async (cluster) => {
  await clusterStart(cluster);
  return cluster;
});
const ready = clusterFixture('cluster_push_restart', LEASE_MS, server);

/** The runtime role's sessions whose last statement was a LISTEN: one per listening replica. */
async function listeners(s: Stage): Promise<number> {
  return scalar<number>(
    s.database.admin,
    "SELECT count(*)::int FROM pg_stat_activity WHERE usename = $1 AND query ILIKE 'LISTEN %'",
    [s.database.runtimeRole],
  );
}

test.serial(
  "cluster: PostgreSQL restarts while the worker's lease page waits at a replica; the cancel that follows reaches the job once",
  async (t) => {
    t.timeout(180_000);
    const s = await stage(t, ready);
    const allListening = async (): Promise<boolean> => (await listeners(s)) === s.replicas.length;
    await until(allListening, { what: 'both replicas listening', timeoutMs: 10_000, intervalMs: 100 });
    const seen = s.replicas.map(pages);
    await until(() => s.replicas.some((replica, i) => pages(replica) > (seen[i] ?? 0)), {
      what: 'a page at a replica',
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    const startedAt = Date.now();
    await clusterRestart(await server);
    t.log(`pg_ctl restart -m fast took ${Date.now() - startedAt} ms`);
    // Each replica's LISTEN connection is made again (cancel-wakeups.ts retries with a growing pause).
    const relistened = await until(allListening, {
      what: 'both replicas listening again',
      timeoutMs: 20_000,
      intervalMs: 100,
      retryErrors: true,
    });
    t.log(`both replicas listened again ${relistened} ms after the restart`);
    const cancelAt = Date.now();
    await deliveredOnce(t, s);
    t.log(`the cancel reached the job and ended the run ${Date.now() - cancelAt} ms after it was sent`);
  },
);

test.serial(
  'cluster: PostgreSQL restarts after a replica claimed the requested stop and before it settled it; the stop reaches the job once',
  async (t) => {
    t.timeout(180_000);
    // The claim outlives the hold and the restart: the other replica fails closed on it, not takes it over.
    const s = await stage(t, ready, { hold: 'after-claim-until-released', dispatchLeaseMs: 60_000 });
    await cancelRequested(t, s);
    const holding = (replica: Job): boolean => replica.lines.includes('held after-claim');
    await until(() => s.replicas.some(holding), { what: 'a replica holding its claim', timeoutMs: 20_000 });
    const held = s.replicas.find(holding) as Job;
    const startedAt = Date.now();
    await clusterRestart(await server);
    t.log(`pg_ctl restart -m fast took ${Date.now() - startedAt} ms`);
    t.deepEqual(await s.world.eventTypes(s.runId), ['run.cancel_requested'], 'nothing settled during the hold');
    s.release();
    const releasedAt = Date.now();
    await held.waitForLine(/^released/, 10_000);
    await reachedOnce(t, s);
    t.log(`the run ended ${Date.now() - releasedAt} ms after the release`);
    t.true(
      held.lines.some((line) => /^observed settled /.test(line)),
      'the replica that claimed the stop settled it',
    );
  },
);
