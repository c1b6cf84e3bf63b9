// The metrics of one process (item 5 of issue 17, docs/decisions/0110, 0112), scraped as text and
// read back strictly: a real job on a real SQLite store is admitted, cancelled and stopped by the
// execution lifecycle, and the counters, histograms and gauges move exactly as that did; no label
// holds a run id, an attempt id or a PID.
import { cgroupUnavailable } from '../helpers/cgroup';
import test from 'ava';

import { OVERDUE_AFTER_DEFAULT_MS } from '../../lib/contract/index';
import { readExportedSummary } from '../../lib/management/index';
import { createMetrics, type Metrics } from '../../lib/metrics/index';
import { capabilities } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { worldDirectory, worldOver } from '../execution/world';
import { until } from '../helpers/wait';
import { labelProblems, parseExposition, type Exposition } from '../helpers/exposition';

const PROJECT = 'p-metrics';

async function scrape(metrics: Metrics): Promise<{ text: string; exposition: Exposition }> {
  const text = await metrics.exposition();
  return { text, exposition: parseExposition(text) };
}

test('a real cancel moves the counters and histograms; the gauges follow the store; no label holds a run, attempt or PID', async (t) => {
  const at = worldDirectory(t);
  const store = openSqliteStore(at.file);
  const metrics = createMetrics({
    projects: [PROJECT],
    overdueAfterMs: OVERDUE_AFTER_DEFAULT_MS,
    readProject: (project) => readExportedSummary(store.managementStore, project, OVERDUE_AFTER_DEFAULT_MS),
  });
  const stores = {
    runStore: store.runStore,
    repository: store.dispatchRepository,
    executionStore: store.executionStore,
    runnerStore: store.runnerStore,
    close: () => store.close(),
  };
  const { app, completed } = worldOver(t, stores, at.receipts, { observer: metrics.observer });

  const before = (await scrape(metrics)).exposition;
  t.is(before.types.get('pidfence_dispatch_claims_total'), 'counter');
  t.is(before.types.get('pidfence_cancel_to_exit_seconds'), 'histogram');
  t.is(before.types.get('pidfence_dispatches'), 'gauge');
  t.is(
    before.value('pidfence_dispatch_claims_total', { outcome: 'claimed' }),
    0,
    'every label value exists from the start',
  );
  t.is(before.value('pidfence_running_jobs', { project: PROJECT }), 0);
  t.is(before.value('pidfence_metrics_store_up'), 1);
  t.is(before.value('pidfence_dispatch_overdue_after_seconds'), OVERDUE_AFTER_DEFAULT_MS / 1_000);

  const admitted = await app.admit({ projectId: PROJECT, command: 'sleep', args: ['3600'] });
  if (admitted.kind !== 'admitted') throw new Error(`admission: ${admitted.kind}`);
  app.start();
  await until(
    async () => (await scrape(metrics)).exposition.value('pidfence_running_jobs', { project: PROJECT }) === 1,
    { timeoutMs: 10_000, what: 'the job to be counted running' },
  );
  const cancelled = await store.runStore.requestCancellation({
    runId: admitted.runId,
    reason: 'user',
    eventId: `evt-${admitted.runId}`,
  });
  t.is(cancelled.kind, 'requested');
  t.like(await completed(admitted.runId), { kind: 'completed', status: 'cancelled' });

  const { text, exposition: after } = await scrape(metrics);
  t.is(after.value('pidfence_dispatch_claims_total', { outcome: 'claimed' }), 1);
  t.is(after.value('pidfence_dispatch_results_total', { result: 'termination_requested' }), 1);
  // A job in its own cgroup is stopped member by member (docs/decisions/0180), else through its group.
  const mode = cgroupUnavailable() === null ? 'cgroup' : capabilities().groupSignalMode;
  t.is(after.value('pidfence_stops_total', { mode }), 1, 'one stop, by the mode of its TERM');
  t.is(after.value('pidfence_dispatch_stale_fences_total'), 0);
  t.is(after.value('pidfence_dispatch_claim_settle_seconds_count'), 1);
  t.true((after.value('pidfence_dispatch_claim_settle_seconds_sum') ?? 0) > 0);
  t.true((after.value('pidfence_verified_signal_seconds_count') ?? 0) >= 1, 'TERM (and CONT) after their proofs');
  t.is(after.value('pidfence_cancel_to_exit_seconds_count'), 1);
  t.true((after.value('pidfence_supervisor_cycles_total') ?? 0) >= 1);
  t.is(after.value('pidfence_supervisor_cycle_failures_total'), 0);
  t.is(after.value('pidfence_dispatches', { project: PROJECT, state: 'dispatched' }), 1);
  t.is(after.value('pidfence_running_jobs', { project: PROJECT }), 0);
  t.is(after.value('pidfence_dispatches_overdue', { project: PROJECT }), 0);

  t.deepEqual(labelProblems(after, [PROJECT]), []);
  const attempt = await store.runStore.getAttempt(admitted.runId, admitted.attemptId);
  for (const secret of [
    admitted.runId,
    admitted.attemptId,
    `"${attempt?.pid ?? 'none'}"`,
    app.runner.runnerId,
    'sleep',
  ])
    t.false(text.includes(secret), `the text carries ${secret}`);
});

test('a store that does not answer removes the project gauges and says so; the next scrape brings them back', async (t) => {
  const at = worldDirectory(t);
  const store = openSqliteStore(at.file);
  t.teardown(() => {
    if (store.database.open) store.close();
  });
  let down = false;
  const metrics = createMetrics({
    projects: [PROJECT, 'p-other'],
    overdueAfterMs: OVERDUE_AFTER_DEFAULT_MS,
    readProject: async (project) => {
      if (down) throw new Error('store down');
      return readExportedSummary(store.managementStore, project, OVERDUE_AFTER_DEFAULT_MS);
    },
  });
  const up = (await scrape(metrics)).exposition;
  t.is(up.value('pidfence_dispatches', { project: 'p-other', state: 'blocked' }), 0);
  down = true;
  const failed = (await scrape(metrics)).exposition;
  t.is(failed.value('pidfence_metrics_store_up'), 0);
  t.false(
    failed.samples.some((sample) => sample.labels.project !== undefined),
    'no stale project gauge',
  );
  down = false;
  t.is((await scrape(metrics)).exposition.value('pidfence_running_jobs', { project: PROJECT }), 0);
});

test('the project allowlist is bounded and its ids are checked', (t) => {
  const readProject = async () => {
    throw new Error('not read');
  };
  t.throws(
    () =>
      createMetrics({
        projects: Array.from({ length: 65 }, (_, index) => `p${index}`),
        overdueAfterMs: 1_000,
        readProject,
      }),
    { code: 'ERR_PIDFENCE_INVALID_METRICS_PROJECTS' },
  );
  t.throws(() => createMetrics({ projects: ['has space'], overdueAfterMs: 1_000, readProject }), {
    code: 'ERR_PIDFENCE_INVALID_ID',
  });
  t.notThrows(() => createMetrics({ projects: [], overdueAfterMs: 1_000, readProject }));
});
