// Stops pushed into the worker's own waiting lease page (docs/decisions/0201), with two
// control-plane replica processes and one `pidfence worker` on loopback: the replica holding the
// page is SIGKILLed, or every database connection of the replicas (the LISTEN one too) is cut, while
// the page waits; the cancel that follows reaches the job once through the next page, with one
// `run.cancel_dispatched`.
import test from 'ava';

import type { Job } from '../helpers/processes';
import { until } from '../helpers/wait';
import { deliveredOnce, pages, stage } from './push-stage';
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
