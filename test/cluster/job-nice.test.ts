// A worker's --job-nice (docs/decisions/0441): a real `pidfence worker --job-nice 10` runs a queued
// job from the control plane; the job runs ten steps nicer than the worker, and the worker itself,
// which answers the lease pages and sends the stops, keeps its priority. Real PostgreSQL, a
// `pidfence control-plane` and `pidfence worker` process, and a real job reading its own /proc entry.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { until } from '../helpers/wait';
import { fleetWorld } from './fleet-world';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_job_nice');

/** Field 19 of /proc/<pid>/stat: the process's nice value. */
function niceOf(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

test.serial(
  'cluster: `pidfence worker --job-nice 10` runs its jobs 10 steps nicer than itself, and stays at its own priority',
  async (t) => {
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const worker = await fleet.worker(url, fleet.certs.client('worker-jn'), ['--job-nice', '10']);
    const own = niceOf('self');
    t.true(own <= 9, `this test needs a runner below nice 10 (it runs at ${own})`);
    const marker = path.join(fleet.scratch, 'job-nice');
    // `cut` inherits the job's nice; its own /proc entry is read, and its name has no space.
    const script = `cut -d' ' -f19 /proc/self/stat > ${marker}.tmp && mv ${marker}.tmp ${marker}`;
    await world.leases.enqueueJob({ runId: 'run-job-nice', projectId: 'project-jn', argv: ['sh', '-c', script] });
    await until(() => existsSync(marker), { timeoutMs: 30_000, what: "the job's nice written" });
    t.is(readFileSync(marker, 'utf8').trim(), String(own + 10), 'the job runs 10 steps nicer');
    t.is(niceOf(worker.identity.pid), own, 'the worker keeps the priority it was started with');
  },
);
