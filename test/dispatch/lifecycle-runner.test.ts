// LifecycleRunner and profiles (design/dispatch §2.6): explicit start/stop, one unref'd timer, no
// overlapping cycles, bounded diagnostics, bounded drain, and a refused start while draining.
import { spawn } from 'node:child_process';
import path from 'node:path';

import test from 'ava';

import {
  DIAGNOSTICS_SUPPRESSED_CODE,
  LOCAL_PROFILES,
  LifecycleRunner,
  PROFILES,
  RunnerDrainingError,
  Supervisor,
  profile,
  type DiagnosticRecord,
} from '../../lib/dispatch/index';
import { openFirstStore } from '../helpers/stores';
import { dispatcherFor } from './world';
import { delay, until } from '../helpers/wait';
import { cancelledRun } from '../helpers/cancelled-runs';

/** A real supervisor-shaped object whose cycles the test controls. */
class ScriptedCycles {
  started = 0;
  finished = 0;
  running = 0;
  maxRunning = 0;
  #release: Array<() => void> = [];
  constructor(private readonly behaviour: (n: number) => Promise<void>) {}

  async runCycle(): Promise<void> {
    this.started += 1;
    this.running += 1;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      await this.behaviour(this.started);
    } finally {
      this.running -= 1;
      this.finished += 1;
    }
  }

  /** A cycle that waits until the test releases it. */
  hold(): Promise<void> {
    return new Promise((resolve) => this.#release.push(resolve));
  }

  releaseAll(): void {
    for (const release of this.#release.splice(0)) release();
  }
}

test('a slow cycle is never overlapped: the next one is scheduled only after it ended', async (t) => {
  const cycles = new ScriptedCycles(() => delay(120));
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 100 });
  runner.start();
  await until(() => cycles.finished >= 3, { intervalMs: 5 });
  await runner.stop();
  t.is(cycles.maxRunning, 1);
  t.true(cycles.started >= 3);
  t.is(cycles.running, 0);
});

test('errors go to the diagnostics callback as { code, count } only, rate-limited, and never end the loop', async (t) => {
  const records: DiagnosticRecord[] = [];
  const cycles = new ScriptedCycles(async (n) => {
    if (n % 2 === 0)
      throw Object.assign(new Error('/var/lib/job.db: SQL SELECT pid=4242'), { code: 'ERR_PIDFENCE_STORE_FAILED' });
    throw new Error('no code, a path /home/x and pid 99');
  });
  const runner = new LifecycleRunner({
    supervisor: cycles,
    cadenceMs: 100,
    diagnostics: (record) => {
      records.push(record);
      throw new Error('a broken sink');
    },
    diagnosticsPerMinute: 3,
  });
  runner.start();
  await until(() => cycles.finished >= 6, { intervalMs: 5 });
  await runner.stop();
  t.is(records.length, 3, 'at most diagnosticsPerMinute records in the window');
  for (const record of records) t.deepEqual(Object.keys(record).sort(), ['code', 'count']);
  t.deepEqual(
    records.map((r) => r.code),
    ['ERR_PIDFENCE_CYCLE_FAILED', 'ERR_PIDFENCE_STORE_FAILED', 'ERR_PIDFENCE_CYCLE_FAILED'],
  );
  t.false(JSON.stringify(records).includes('4242'));
  t.true(cycles.started >= 6, 'the loop went on after errors and a throwing callback');
});

test('stop() cancels the pending timer at once: no cycle runs after it', async (t) => {
  const cycles = new ScriptedCycles(async () => {});
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 200 });
  runner.start();
  await until(() => cycles.finished >= 1, { intervalMs: 5 });
  t.deepEqual(await runner.stop(), { drained: true });
  const count = cycles.started;
  await delay(450);
  t.is(cycles.started, count);
  t.is(runner.state, 'stopped');
});

test('after a drain timeout the old cycle never schedules again, and start() is refused until it ended', async (t) => {
  const cycles: ScriptedCycles = new ScriptedCycles((): Promise<void> => cycles.hold());
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 100, stopTimeoutMs: 50 });
  runner.start();
  await until(() => cycles.started === 1, { intervalMs: 5 });
  t.deepEqual(await runner.stop(), { drained: false });
  t.true(runner.cycleRunning);
  const error = t.throws(() => runner.start(), { instanceOf: RunnerDrainingError });
  t.is((error as RunnerDrainingError).code, 'ERR_PIDFENCE_RUNNER_DRAINING');
  cycles.releaseAll();
  await runner.drained();
  await delay(300);
  t.is(cycles.started, 1, 'the old cycle ended without scheduling another');
  t.notThrows(() => runner.start());
  await until(() => cycles.started === 2, { intervalMs: 5 });
  cycles.releaseAll();
  t.deepEqual(await runner.stop(), { drained: true });
  t.throws(
    () => {
      runner.start();
      runner.start();
    },
    { code: 'ERR_PIDFENCE_RUNNER_STARTED' } as never,
  );
  cycles.releaseAll();
  await runner.stop();
  cycles.releaseAll();
});

test('idle, the runner wakes once per cadence against a real store and writes nothing', async (t) => {
  const store = await openFirstStore(t);
  await cancelledRun(store.runStore, { running: {} });
  const supervisor = new Supervisor({ repository: store.repository, dispatcher: dispatcherFor(store, []) });
  await supervisor.runCycle(); // the one run backs off: from now on nothing is due
  const before = await store.writeMarker();
  let wakes = 0;
  const counting = {
    runCycle: () => {
      wakes += 1;
      return supervisor.runCycle();
    },
  };
  const runner = new LifecycleRunner({ supervisor: counting, cadenceMs: 100, initialDelayMs: 100 });
  const started = Date.now();
  runner.start();
  await delay(650);
  await runner.stop();
  const elapsed = Date.now() - started;
  t.true(wakes >= 1, 'it woke');
  t.true(wakes <= Math.floor(elapsed / 100), `at most one wake per cadence (${wakes} in ${elapsed} ms)`);
  t.is(await store.writeMarker(), before);
});

test("only start() creates a timer, and it is unref'd: a process with a started runner exits on its own", async (t) => {
  const script = path.resolve(__dirname, 'runner-exit-child.js');
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  t.is(code, 0);
  t.deepEqual(output.trim().split('\n'), [
    'timers-before-start 0',
    'timers-after-construct 0',
    'timers-after-start 1',
    'state running',
  ]);
});

test('profiles are named presets within the hard limits; edge is the slowest and smallest', (t) => {
  t.deepEqual(Object.keys(PROFILES), ['edge', 'standalone', 'cluster']);
  for (const p of Object.values(PROFILES)) {
    t.true(p.pageSize >= 1 && p.pageSize <= 64);
    t.true(p.pagesPerCycle >= 1 && p.pagesPerCycle <= 64);
    t.true(Object.isFrozen(p));
  }
  t.true(profile('edge').periodMs > profile('standalone').periodMs);
  t.true(
    profile('edge').pageSize * profile('edge').pagesPerCycle <
      profile('standalone').pageSize * profile('standalone').pagesPerCycle,
  );
  t.deepEqual(
    [profile('standalone').pageSize, profile('standalone').pagesPerCycle],
    [32, 4],
    'the design/dispatch §2.6 defaults',
  );
  t.throws(() => profile('huge' as never), { code: 'ERR_PIDFENCE_INVALID_PROFILE' } as never);
  t.throws(
    () => profile('cluster', LOCAL_PROFILES),
    { code: 'ERR_PIDFENCE_INVALID_PROFILE' } as never,
    'the local lifecycle is edge or standalone',
  );
  t.deepEqual(
    [profile('edge').pageSize, profile('standalone').pageSize],
    [4, 32],
    'one table: the execution pages (design/execution §4) are the dispatch pages',
  );
  t.throws(() => new LifecycleRunner({ supervisor: { runCycle: async () => {} }, cadenceMs: 99 }), {
    code: 'ERR_PIDFENCE_INVALID_CADENCE',
  } as never);
  t.throws(
    () => new LifecycleRunner({ supervisor: { runCycle: async () => {} }, cadenceMs: 1000, stopTimeoutMs: 60_001 }),
    { code: 'ERR_PIDFENCE_INVALID_STOP_TIMEOUT' } as never,
  );
  t.throws(
    () => new LifecycleRunner({ supervisor: { runCycle: async () => {} }, cadenceMs: 1000, diagnosticsPerMinute: 61 }),
    { code: 'ERR_PIDFENCE_INVALID_DIAGNOSTICS_LIMIT' } as never,
  );
});

test('a suppressed-count record follows once the diagnostics window rolls over', async (t) => {
  const { RateLimitedDiagnostics } = await import('../../lib/dispatch/diagnostics');
  let now = 0;
  const records: DiagnosticRecord[] = [];
  const diagnostics = new RateLimitedDiagnostics(
    (r) => records.push(r),
    2,
    () => now,
  );
  for (let i = 0; i < 5; i += 1) diagnostics.report('ERR_PIDFENCE_STORE_FAILED');
  now += 60_000;
  diagnostics.report('ERR_PIDFENCE_STORE_FAILED');
  t.deepEqual(records, [
    { code: 'ERR_PIDFENCE_STORE_FAILED', count: 1 },
    { code: 'ERR_PIDFENCE_STORE_FAILED', count: 1 },
    { code: DIAGNOSTICS_SUPPRESSED_CODE, count: 3 },
    { code: 'ERR_PIDFENCE_STORE_FAILED', count: 1 },
  ]);
});

// The one loop's wake-ups and next-due arming (issue 31 item 3, docs/decisions/0175, 0176, 0210).

test('wake-ups are coalesced: any number during a cycle make exactly one more cycle, at once', async (t) => {
  const cycles: ScriptedCycles = new ScriptedCycles((n) => (n === 2 ? cycles.hold() : Promise.resolve()));
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 60_000 });
  runner.start();
  await until(() => cycles.finished === 1, { intervalMs: 5 });
  runner.wake();
  await until(() => cycles.started === 2, {
    intervalMs: 5,
    timeoutMs: 2_000,
    what: 'the woken cycle (the cadence is a minute)',
  });
  for (let i = 0; i < 1_000; i += 1) runner.wake();
  cycles.releaseAll();
  await until(() => cycles.finished === 3, {
    intervalMs: 5,
    timeoutMs: 2_000,
    what: 'one more cycle for the thousand wake-ups',
  });
  await delay(200);
  t.is(cycles.started, 3, 'a thousand wake-ups during a cycle made one cycle');
  t.is(cycles.maxRunning, 1);
  t.is(runner.wakeUps, 1_001);
  await runner.stop();
});

test('a wake-up before start() or after stop() schedules nothing', async (t) => {
  const cycles = new ScriptedCycles(async () => {});
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 60_000, initialDelayMs: 60_000 });
  runner.wake();
  await delay(100);
  t.is(cycles.started, 0, 'not started: nothing runs');
  runner.start();
  runner.wake();
  await until(() => cycles.finished === 1, { intervalMs: 5, timeoutMs: 2_000, what: 'the woken first cycle' });
  await runner.stop();
  runner.wake();
  await delay(150);
  t.is(cycles.started, 1);
  t.is(runner.state, 'stopped');
});

test('the one timer is armed for the next due item when it comes before the cadence, and for the cadence otherwise', async (t) => {
  const cycles = new ScriptedCycles(async () => {});
  let due: number | null = 150;
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 60_000, nextDueInMs: () => due });
  runner.start();
  await until(() => cycles.finished >= 3, {
    intervalMs: 5,
    timeoutMs: 5_000,
    what: 'cycles at the due times (the cadence is a minute)',
  });
  due = null;
  const settled = cycles.started;
  await delay(600);
  t.true(cycles.started <= settled + 1, 'without a due item: the cadence');
  await runner.stop();
  const throwing = new LifecycleRunner({
    supervisor: cycles,
    cadenceMs: 60_000,
    nextDueInMs: () => {
      throw new Error('a store gone');
    },
  });
  const before = cycles.started;
  throwing.start();
  await until(() => cycles.started === before + 1, { intervalMs: 5 });
  await delay(300);
  t.is(cycles.started, before + 1, 'a due hint that fails leaves the cadence');
  await throwing.stop();
});

test('runNow never runs beside a timed cycle, and a wake-up during it is taken right after it', async (t) => {
  const cycles = new ScriptedCycles(() => delay(150));
  const runner = new LifecycleRunner({ supervisor: cycles, cadenceMs: 100 });
  runner.start();
  let running = 0;
  let maxRunning = 0;
  const now = async (): Promise<string> => {
    running += 1;
    maxRunning = Math.max(maxRunning, running + cycles.running);
    await delay(250); // longer than the cadence: the timer falls due meanwhile
    maxRunning = Math.max(maxRunning, running + cycles.running);
    running -= 1;
    return 'done';
  };
  for (let i = 0; i < 4; i += 1) t.is(await runner.runNow(now), 'done');
  await runner.stop();
  t.is(maxRunning, 1, 'never two cycles at once');
  t.is(cycles.maxRunning, 1);

  const slow = new ScriptedCycles(async () => {});
  const edge = new LifecycleRunner({ supervisor: slow, cadenceMs: 60_000 });
  edge.start();
  await until(() => slow.finished === 1, { intervalMs: 5 });
  await edge.runNow(async () => {
    edge.wake();
    await delay(50);
  });
  await until(() => slow.finished === 2, {
    intervalMs: 5,
    timeoutMs: 2_000,
    what: 'the cycle for the wake-up that came during runNow',
  });
  await edge.stop();
  t.pass();
});
