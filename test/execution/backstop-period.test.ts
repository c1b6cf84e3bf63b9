// The active page and the watched attempts once per control period (docs/decisions/0435). A mass
// stop ends many jobs one after another; each end's notice wakes a cycle, and each woken cycle used
// to converge the whole active page and every watched attempt again (a worker of 50 jobs: about 50
// looks per end). Now a woken cycle looks only at its notices and its stops; the page, the backstop
// for a lost notice, waits for the period. Real jobs, a real SQLite store.
import test, { type ExecutionContext } from 'ava';

import type { ControlCycleReport } from '../../lib/execution/index';
import { until } from '../helpers/wait';
import { openWorld, overriding, worldDirectory, type World } from './world';

/** A runner on `profile` whose attempt reads are counted and whose cycles are recorded. */
function countedRunner(
  t: ExecutionContext,
  profile: 'edge' | 'standalone',
): World & { readonly reads: { count: number }; readonly reports: ControlCycleReport[] } {
  const reads = { count: 0 };
  const reports: ControlCycleReport[] = [];
  const world = openWorld(t, {
    at: worldDirectory(t),
    profile,
    onCycle: (report) => reports.push(report),
    wrap: (store) => ({
      runStore: overriding(store.runStore, {
        getAttempt: (runId: string, attemptId: string) => {
          reads.count += 1;
          return store.runStore.getAttempt(runId, attemptId);
        },
      }),
    }),
  });
  return Object.assign(world, { reads, reports });
}

async function admitted(world: World, script: string): Promise<string> {
  const outcome = await world.app.admit({ projectId: 'default', command: 'sh', args: ['-c', script] });
  if (outcome.kind !== 'admitted') throw new Error('not admitted');
  return outcome.runId;
}

test('16 jobs ending one after another on the 5 s edge cadence: each woken cycle looks at its notices only, about one attempt read per end, not the page and every watched run per end', async (t) => {
  const JOBS = 16;
  const runner = countedRunner(t, 'edge');
  const runIds: string[] = [];
  // Ends 100 ms apart, all well inside one 5 s period after the first cycle.
  for (let index = 0; index < JOBS; index += 1)
    runIds.push(await admitted(runner, `sleep ${(2 + index / 10).toFixed(1)}`));
  runner.app.start();
  await until(() => runner.reports.length >= 1, { timeoutMs: 10_000, what: 'the first cycle' });
  const readsBefore = runner.reads.count;
  const cyclesBefore = runner.reports.length;
  await until(() => runner.completions.length === JOBS, { timeoutMs: 20_000, what: 'every job to end' });
  const reads = runner.reads.count - readsBefore;
  const during = runner.reports.slice(cyclesBefore);
  const woken = during.filter((report) => report.active === null);
  // A notice's look is one read; a period's look (at most two while the jobs end) reads 16 more.
  t.log(`${reads} attempt reads for ${JOBS} ends`);
  t.true(reads <= 3 * JOBS, `${reads} attempt reads for ${JOBS} ends over ${during.length} cycles`);
  t.true(woken.length >= 2, `${woken.length} woken cycles took the ends`);
  t.true(
    woken.reduce((sum, report) => sum + report.completed, 0) >= JOBS / 2,
    'most ends were found by their notices in woken cycles',
  );
  for (const completion of runner.completions) t.like(completion.outcome, { kind: 'completed', status: 'succeeded' });
  t.deepEqual(new Set(runner.completions.map((completion) => completion.runId)), new Set(runIds));
});

test('an end whose notice was lost is still found by the period’s look: a cycle the cadence started, not a woken one', async (t) => {
  const runner = countedRunner(t, 'standalone');
  const runId = await admitted(runner, 'sleep 0.5');
  runner.app.start();
  await until(() => runner.reports.length >= 1, { timeoutMs: 10_000, what: 'the first cycle' });
  // Every notice from here on is taken before the lifecycle hears of it, as a dropped one is.
  const notices = runner.app.notices;
  let lost = 0;
  notices.onNotice = () => {
    lost += notices.take().length;
  };
  await runner.completed(runId, 10_000);
  t.true(lost >= 1, "the job's notice was lost");
  const ending = runner.reports.find((report) => report.completed > 0);
  t.not(ending?.active, null, 'the ending cycle looked at the active page');
  t.like(runner.completions[0]?.outcome, { kind: 'completed', status: 'succeeded' });
});

test('jobs whose launcher this runner spawned and still waits on are not read by the period’s look: their launcher’s exit brings the notice (decision 0439)', async (t) => {
  const JOBS = 16;
  const runner = countedRunner(t, 'standalone');
  const runIds: string[] = [];
  for (let index = 0; index < JOBS; index += 1) runIds.push(await admitted(runner, 'sleep 4'));
  runner.app.start();
  await until(() => runner.reports.length >= 1, { timeoutMs: 10_000, what: 'the first cycle' });
  const readsBefore = runner.reads.count;
  const looksBefore = runner.reports.filter((report) => report.active !== null).length;
  // Three more looks of the 1 s period while every job runs.
  await until(() => runner.reports.filter((report) => report.active !== null).length >= looksBefore + 3, {
    timeoutMs: 10_000,
    what: 'three periods',
  });
  const reads = runner.reads.count - readsBefore;
  t.log(`${reads} attempt reads over three periods of ${JOBS} running jobs`);
  // Each look used to read every running attempt: 16 a period.
  t.true(reads < JOBS, `${reads} attempt reads over three periods`);
  t.is(runner.completions.length, 0, 'every job still runs');
  await until(() => runner.completions.length === JOBS, { timeoutMs: 20_000, what: 'every job to end' });
  for (const completion of runner.completions) t.like(completion.outcome, { kind: 'completed', status: 'succeeded' });
  t.deepEqual(runner.completions.map((completion) => completion.runId).sort(), [...runIds].sort());
});
