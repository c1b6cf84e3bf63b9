// design/execution §Verification 1-8 as named tests, on real processes and a real SQLite file.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { PROFILES } from '../../lib/dispatch/index';
import {
  CompletionNotices,
  receiptTokenDigest,
  writeReceiptAtomic,
  createReceiptToken,
  type CompletionReceipt,
  type ExecutionApplication,
  type ExecutionStores,
} from '../../lib/execution/index';
import type { ProcessIdentity } from '../../lib/native/index';
import { formatHandle, handleFromIdentity } from '../../lib/process/index';
import type { ExecutionStore } from '../../lib/store/execution-store';
import { openPostgresStore } from '../../lib/store/postgres/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { migratedDatabase, runtimeUrlNamed, uniqueApplicationName } from '../helpers/pg-store';
import { spawnJob } from '../helpers/processes';
import { timerCensus } from '../helpers/timer-census';
import {
  diskErrorWhile,
  handleAlive,
  openWorld,
  overriding,
  receiptExists,
  shutdownDrainGate,
  worldDirectory,
  worldOver,
  type World,
} from './world';
import { delay, until } from '../helpers/wait';
import { driverOf } from '../../lib/store/sqlite/driver';

const LIB = path.resolve(__dirname, '..', '..', '..', 'lib');

/** A handle naming a live process under another identity (the pidfs inode where the kernel has it). */
function forgedHandle(identity: ProcessIdentity): string {
  const real = handleFromIdentity(identity);
  return formatHandle(
    real.pidfsIno === undefined
      ? { ...real, startTicks: String(BigInt(real.startTicks) + 1n) }
      : { ...real, pidfsIno: String(BigInt(real.pidfsIno) + 1n) },
  );
}

test('lifecycle gate 1: an authenticated receipt commits attempt and run terminal states with ordered events; the receipt is deleted only after the commit', async (t) => {
  const seenAtCommit: boolean[] = [];
  const world = openWorld(t, {
    wrap: (store) => ({
      executionStore: overriding<ExecutionStore>(store.executionStore, {
        completeAttempt: async (command: Parameters<ExecutionStore['completeAttempt']>[0]) => {
          seenAtCommit.push(receiptExists(world.receipts, command.attemptId));
          return store.executionStore.completeAttempt(command);
        },
      }),
    }),
  });
  world.app.start();
  const admitted = await world.app.admit({ projectId: 'p1', command: 'sh', args: ['-c', 'exit 3'] });
  if (admitted.kind !== 'admitted') throw new Error('not admitted');
  const outcome = await world.completed(admitted.runId);
  t.like(outcome, { kind: 'completed', status: 'failed', cause: 'receipt', exitCode: 3, signal: null });
  t.deepEqual(seenAtCommit, [true], 'the receipt still existed when the terminal transaction ran');
  t.false(receiptExists(world.receipts, admitted.attemptId), 'deleted after the commit');
  const run = await world.store.runStore.getRun(admitted.runId);
  const attempt = await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId);
  t.is(run?.status, 'failed');
  t.is(attempt?.status, 'failed');
  const attemptEvents = await world.store.executionStore.listAttemptEvents(admitted.runId, admitted.attemptId);
  t.deepEqual(
    attemptEvents.map((e) => [e.type, e.payload]),
    [['attempt.terminal', { status: 'failed', cause: 'receipt', exitCode: 3, signal: null }]],
  );
  const runEvents = await world.store.runStore.listEvents(admitted.runId);
  t.deepEqual(
    runEvents.map((e) => e.type),
    ['run.terminal'],
  );
  // Attempt event first, then the run event, in one transaction (same commit time).
  t.true((attemptEvents[0]?.createdAtMs ?? -1) === runEvents[0]?.createdAtMs);
  const journal = driverOf(world.store.database)
    .prepare('SELECT action, done_at_ms IS NOT NULL AS done FROM receipt_journal')
    .all();
  t.deepEqual(journal, [{ action: 'delete', done: 1 }]);
  // Privacy: nothing about the command reaches the store.
  const dump =
    JSON.stringify(driverOf(world.store.database).prepare('SELECT * FROM run_events').all()) +
    JSON.stringify(driverOf(world.store.database).prepare('SELECT * FROM attempt_events').all());
  t.false(/exit 3|sh -c|"sh"/.test(dump));
});

test('lifecycle gate 2: deadline and cancellation intent are durable before any signal; a store failure, no exact handle or an unknown stop writes no false terminal', async (t) => {
  let failIntent = true;
  const world = openWorld(t, {
    wrap: (store) => ({
      runStore: diskErrorWhile(store.runStore, 'requestCancellation', () => failIntent),
    }),
  });
  const admitted = await world.app.admit({ projectId: 'p1', command: 'sleep', args: ['30'], timeoutMs: 1 });
  if (admitted.kind !== 'admitted') throw new Error('not admitted');
  const attempt = await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId);
  const handle = attempt?.handle ?? '';
  t.is(attempt?.status, 'running');
  await delay(20);
  await t.throwsAsync(world.app.lifecycle.runCycle(), { message: /disk I\/O error/ });
  t.true(handleAlive(handle), 'no intent, so no signal');
  t.is((await world.store.runStore.getRun(admitted.runId))?.status, 'running');
  t.deepEqual(await world.store.runStore.listEvents(admitted.runId), []);

  failIntent = false;
  await world.app.lifecycle.runCycle();
  const events = (await world.store.runStore.listEvents(admitted.runId)).map((e) => [e.type, e.payload]);
  t.deepEqual(events.slice(0, 2), [
    ['run.cancel_requested', { reason: 'timeout' }],
    ['run.cancel_dispatched', { attemptId: admitted.attemptId, dispatchCount: 1, result: 'termination_requested' }],
  ]);
  await world.app.lifecycle.runCycle();
  const run = await world.store.runStore.getRun(admitted.runId);
  t.is(run?.cancelReason, 'timeout');
  t.is(run?.status, 'timed_out');
  t.false(handleAlive(handle));

  // No exact handle: the handle names a live process under another identity → blocked, still running.
  const job = spawnJob(t, 'sleep', ['30']);
  const forged = forgedHandle(job.identity);
  const runId = 'run-forged';
  await world.store.runStore.createRun({ runId, projectId: 'p1' });
  await world.store.runStore.createAttempt({ runId, attemptId: `${runId}-a1`, runnerId: world.app.runner.runnerId });
  await world.store.runStore.advanceAttempt({
    runId,
    attemptId: `${runId}-a1`,
    from: 'claimed',
    to: 'running',
    pid: job.identity.pid,
    handle: forged,
  });
  await world.store.runStore.requestCancellation({ runId, reason: 'user', eventId: 'evt-forged' });
  await world.app.lifecycle.runCycle();
  await world.app.lifecycle.runCycle();
  t.is((await world.store.runStore.getRun(runId))?.status, 'running', 'no false terminal without proof');
  t.is((await world.store.runStore.getAttempt(runId, `${runId}-a1`))?.status, 'running');
  t.true((await world.store.runStore.listEvents(runId)).some((e) => e.type === 'run.cancel_dispatch_blocked'));
  t.is(job.child.exitCode, null, 'the innocent process was not signalled');
});

test('lifecycle gate 3: the due source uses the deadline index with a stable keyset, at most 64; edge reads 4 and standalone 32 a page', async (t) => {
  const at = worldDirectory(t);
  const store = openSqliteStore(at.file);
  t.teardown(() => store.close());
  for (let i = 0; i < 40; i += 1) {
    const runId = `run-d${String(i).padStart(2, '0')}`;
    await store.runStore.createRun({ runId, projectId: 'p1' });
    await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1`, timeoutMs: 1 });
  }
  await delay(5);
  const plan = driverOf(store.database)
    .prepare(
      `EXPLAIN QUERY PLAN ${(await import('../../lib/store/sqlite/execution-statements')).EXECUTION_SQL.dueDeadlinesPage}`,
    )
    .all({ nowMs: Date.now(), afterDueAtMs: -1, afterRunId: '', afterAttemptId: '', limit: 4 }) as Array<{
    detail: string;
  }>;
  t.true(
    plan.some((row) => /USING INDEX attempts_deadline_due/.test(row.detail)),
    JSON.stringify(plan),
  );
  const seen: string[] = [];
  let after;
  for (;;) {
    const page = await store.executionStore.dueDeadlinesPage(after === undefined ? { limit: 7 } : { limit: 7, after });
    t.true(page.items.length <= 7);
    seen.push(...page.items.map((item) => item.runId));
    if (page.next === null) break;
    after = page.next;
  }
  t.is(seen.length, 40);
  t.is(new Set(seen).size, 40, 'no item twice');
  await t.throwsAsync(store.executionStore.dueDeadlinesPage({ limit: 65 }), {
    code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT',
  });
  await t.throwsAsync(store.executionStore.activeAttemptsPage({ limit: 65 }), {
    code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT',
  });

  t.is(PROFILES.edge.periodMs, 5_000);
  t.is(PROFILES.standalone.periodMs, 1_000);
});

/** Runs owned by `world`'s runner, each with one attempt that `shape` finishes setting up. */
async function ownedRuns(
  world: World,
  count: number,
  shape: (runId: string, attemptId: string) => Promise<void>,
): Promise<string[]> {
  await world.app.open();
  const runIds: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const runId = `run-p${String(i).padStart(2, '0')}`;
    await world.store.runStore.createRun({ runId, projectId: 'p1' });
    await shape(runId, `${runId}-a1`);
    runIds.push(runId);
  }
  return runIds;
}

async function eventCount(world: World, runIds: readonly string[], type: string): Promise<number> {
  let count = 0;
  for (const runId of runIds)
    count += (await world.store.runStore.listEvents(runId)).filter((e) => e.type === type).length;
  return count;
}

// More due items than either page: one control cycle of the application createExecution built
// handles exactly the profile's page, from the deadline source and from the cancellation source.
for (const [profile, page] of [
  ['edge', 4],
  ['standalone', 32],
] as const) {
  test(`lifecycle gate 3: createExecution's ${profile} profile reads ${page} due deadlines and ${page} due cancellations a cycle`, async (t) => {
    const deadlines = openWorld(t, { profile });
    const timed = await ownedRuns(deadlines, 40, async (runId, attemptId) => {
      await deadlines.store.runStore.createAttempt({
        runId,
        attemptId,
        timeoutMs: 1,
        runnerId: deadlines.app.runner.runnerId,
      });
    });
    await delay(5);
    t.like(await deadlines.app.lifecycle.runCycle(), { deadlines: page });
    t.is(await eventCount(deadlines, timed, 'run.cancel_requested'), page, 'durable timeout intent for one page');

    // Cancellations of running attempts whose handle names a live process under another identity:
    // each dispatch ends blocked (nothing signalled), one event per cancellation the cycle handled.
    const cancels = openWorld(t, { profile });
    const innocent = spawnJob(t, 'sleep', ['30']);
    const forged = forgedHandle(innocent.identity);
    const cancelled = await ownedRuns(cancels, 40, async (runId, attemptId) => {
      await cancels.store.runStore.createAttempt({ runId, attemptId, runnerId: cancels.app.runner.runnerId });
      await cancels.store.runStore.advanceAttempt({
        runId,
        attemptId,
        from: 'claimed',
        to: 'running',
        pid: innocent.identity.pid,
        handle: forged,
      });
      await cancels.store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${runId}` });
    });
    const report = await cancels.app.lifecycle.runCycle();
    t.like(report, { deadlines: 0, active: page });
    t.is(
      await eventCount(cancels, cancelled, 'run.cancel_dispatch_blocked'),
      page,
      'one page of cancellations dispatched',
    );
    t.is(innocent.child.exitCode, null, 'the innocent process was not signalled');
  });
}

test('lifecycle gate 4: the shutdown drain writes shutdown first, keeps an existing reason, and stops the exact executions before storage closes', async (t) => {
  const activeAtClose: number[] = [];
  const world = openWorld(t, {
    wrap: (store) => ({
      close: () => {
        activeAtClose.push(
          (
            driverOf(store.database)
              .prepare("SELECT count(*) AS n FROM attempts WHERE status IN ('claimed', 'starting', 'running')")
              .get() as { n: number }
          ).n,
        );
        store.close();
      },
    }),
  });
  await shutdownDrainGate(t, { app: world.app, runStore: world.store.runStore }, activeAtClose, async () => {
    const reopened = openSqliteStore(world.file);
    t.teardown(() => reopened.close());
    return reopened.runStore;
  });
});

test('lifecycle gate 5: admission exposes no completion Promise and a repeated completion notice is consumed once', async (t) => {
  const notices = new CompletionNotices();
  t.true(notices.add({ runId: 'r1', attemptId: 'r1-a1' }));
  t.false(notices.add({ runId: 'r1', attemptId: 'r1-a1' }));
  t.deepEqual(notices.take(), [{ runId: 'r1', attemptId: 'r1-a1' }]);
  for (let i = 0; i < 70; i += 1) notices.add({ runId: `r${i}`, attemptId: `r${i}-a1` });
  t.is(notices.size, 64);
  t.is(notices.dropped, 6);

  const world = openWorld(t);
  const admitted = await world.app.admit({ projectId: 'p1', command: 'true' });
  t.deepEqual(Object.keys(admitted).sort(), ['attemptId', 'kind', 'runId', 'status']);
  t.false(Object.values(admitted).some((value) => typeof (value as { then?: unknown })?.then === 'function'));
  if (admitted.kind !== 'admitted') throw new Error('not admitted');
  world.app.start();
  await world.completed(admitted.runId);
  world.app.notices.add({ runId: admitted.runId, attemptId: admitted.attemptId });
  world.app.notices.add({ runId: admitted.runId, attemptId: admitted.attemptId });
  await world.app.lifecycle.runCycle();
  t.is(world.completions.filter((c) => c.runId === admitted.runId).length, 1, 'one completion for the identity');
  t.like(world.completions[0]?.outcome, { kind: 'completed', status: 'succeeded' });
});

function receiptFor(
  runId: string,
  attemptId: string,
  token: string,
  extra: Partial<Omit<CompletionReceipt, 'v'>> = {},
): CompletionReceipt {
  const now = Date.now();
  return {
    v: 1,
    runId,
    attemptId,
    seq: 1,
    token,
    exitCode: 0,
    signal: null,
    startedAtMs: now,
    finishedAtMs: now,
    spawnFailed: false,
    ...extra,
  };
}

test('lifecycle gate 6: startup recovery and online completion share one processor; a late receipt cannot overwrite cancelled or timed_out', async (t) => {
  const world = openWorld(t);
  await world.app.open();
  const { runStore } = world.store;
  const tokens = new Map<string, string>();
  for (const name of ['late', 'fresh', 'forged', 'replay']) {
    const token = createReceiptToken();
    tokens.set(name, token);
    await runStore.createRun({ runId: `run-${name}`, projectId: 'p1' });
    await runStore.createAttempt({
      runId: `run-${name}`,
      attemptId: `run-${name}-a1`,
      receiptTokenDigest: receiptTokenDigest(token),
      runnerId: world.app.runner.runnerId,
    });
  }
  // `late`: cancelled before it started; then its success receipt arrives.
  await runStore.requestCancellation({ runId: 'run-late', reason: 'user', eventId: 'evt-late' });
  t.like(await world.app.processor.process({ runId: 'run-late', attemptId: 'run-late-a1' }), {
    kind: 'completed',
    status: 'cancelled',
    cause: 'never_started',
  });
  writeReceiptAtomic(world.receipts, receiptFor('run-late', 'run-late-a1', tokens.get('late') ?? ''));
  // `fresh`: a valid receipt waiting; `forged`: the wrong token; `replay`: a sequence never issued.
  writeReceiptAtomic(
    world.receipts,
    receiptFor('run-fresh', 'run-fresh-a1', tokens.get('fresh') ?? '', { exitCode: 0 }),
  );
  writeReceiptAtomic(world.receipts, receiptFor('run-forged', 'run-forged-a1', createReceiptToken()));
  writeReceiptAtomic(world.receipts, receiptFor('run-replay', 'run-replay-a1', tokens.get('replay') ?? '', { seq: 3 }));

  // The application's own recovery: every item it looks at goes through the application's one
  // processor (the calls are counted on that very object), never one the test hands in.
  const appProcessor = world.app.processor;
  const processOnline = appProcessor.process.bind(appProcessor);
  const recoveredThrough: string[] = [];
  appProcessor.process = async (ref) => {
    recoveredThrough.push(ref.runId);
    return processOnline(ref);
  };
  const recovered = await world.app.recover();
  appProcessor.process = processOnline;
  t.like(recovered, { completed: 1, quarantined: 2, running: 0 });
  t.deepEqual(
    [...new Set(recoveredThrough)].sort(),
    ['run-forged', 'run-fresh', 'run-replay'],
    "recovery used the application's processor",
  );
  t.is((await runStore.getRun('run-fresh'))?.status, 'succeeded');
  t.like(await world.app.processor.process({ runId: 'run-late', attemptId: 'run-late-a1' }), {
    kind: 'terminal',
    status: 'cancelled',
    lateReceipt: true,
  });
  t.is((await runStore.getRun('run-late'))?.status, 'cancelled', 'the late success did not overwrite cancelled');
  t.false(receiptExists(world.receipts, 'run-late-a1'));
  t.is((await runStore.getRun('run-forged'))?.status, 'running');
  const quarantine = readdirSync(path.join(world.receipts, 'quarantine')).sort();
  t.deepEqual(quarantine, ['run-forged-a1.receipt', 'run-replay-a1.receipt']);
  const journal = driverOf(world.store.database)
    .prepare("SELECT attempt_id AS a, reason FROM receipt_journal WHERE action = 'quarantine' ORDER BY attempt_id")
    .all();
  t.deepEqual(journal, [
    { a: 'run-forged-a1', reason: 'token' },
    { a: 'run-replay-a1', reason: 'sequence' },
  ]);
});

/** A stack frame in the product's code (compiled or source-mapped), not in a dependency. */
const PRODUCT_FRAME = /^(?!.*node_modules)(?!.*[\\/]test[\\/]).*[\\/]lib[\\/]/;
const FIRED_CYCLES = 4;

/**
 * Lifecycle gate 7 over any store: timers and watchers counted from before admission until
 * FIRED_CYCLES cycles fired by the lifecycle's own timer (no runCycle call) over 5 running jobs.
 */
async function oneTimerAcrossAdmissionAndFiredCycles(t: ExecutionContext, app: ExecutionApplication): Promise<void> {
  const census = timerCensus({ origin: PRODUCT_FRAME });
  t.teardown(() => census.disable());
  const jobs = [];
  for (let i = 0; i < 5; i += 1) jobs.push(await app.admit({ projectId: 'p1', command: 'sleep', args: ['30'] }));
  t.true(jobs.every((job) => job.kind === 'admitted'));
  await delay(50);
  t.is(census.liveFromOrigin, 0, 'admission leaves no timer behind: no per-task timer');
  const createdBeforeStart = census.createdFromOrigin;
  const cyclesBefore = app.lifecycle.cycles;
  app.start();
  await until(() => app.lifecycle.cycles >= cyclesBefore + FIRED_CYCLES, {
    timeoutMs: 20_000,
    what: 'fired control cycles',
  });
  const fired = app.lifecycle.cycles - cyclesBefore;
  const armed = census.createdFromOrigin - createdBeforeStart;
  await delay(50);
  const live = census.liveFromOrigin;
  census.disable();
  // The one timer is re-armed once per cycle (start arms the first): never one per job or per cycle step.
  t.true(armed >= fired && armed <= fired + 1, `${armed} timers armed for ${fired} fired cycles`);
  t.true(live <= 1, `${live} product timers alive across the cycles`);
  t.is(census.watchers, 0, 'no file-system watcher');
  t.deepEqual(
    process.getActiveResourcesInfo().filter((name) => /FSWatcher|FSEvent|StatWatcher/.test(name)),
    [],
  );
  const first = app.lifecycle.stop(1_000);
  t.is(app.lifecycle.stop(1_000), first, 'the same stop');
  t.deepEqual(await first, { drained: true });
  t.is(app.lifecycle.state, 'stopped');
}

test.serial(
  'lifecycle gate 7: the lifecycle owns one periodic timer, no per-task timer or watcher, across admission and fired cycles; stop is idempotent and bounded',
  async (t) => {
    const world = openWorld(t);
    await oneTimerAcrossAdmissionAndFiredCycles(t, world.app);
  },
);

test.serial(
  'lifecycle gate 7: on PostgreSQL, whose cycles really wait on the network, still one timer and no watcher',
  async (t) => {
    const database = await migratedDatabase('gate7');
    t.teardown(() => database.dispose());
    const store = await openPostgresStore(runtimeUrlNamed(database, uniqueApplicationName('pidfence_gate7')), {
      maxConnections: 2,
    });
    const stores: ExecutionStores = {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    };
    const { app } = worldOver(t, stores, worldDirectory(t).receipts);
    // A cycle on this store yields to the event loop while PostgreSQL answers: its store calls are
    // network round trips (counted here as the sessions the server shows for this store).
    await oneTimerAcrossAdmissionAndFiredCycles(t, app);
    const sessions = await database.admin.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'pidfence_gate7%'",
    );
    t.true(Number(sessions.rows[0]?.n ?? 0) >= 1, 'the cycles ran over real connections');
  },
);

test('lifecycle gate 8: the execution entry imports only its allowed layers, the launcher stays small, and SQLite use loads no pg', (t) => {
  const importsOf = (file: string) =>
    [
      ...readFileSync(file, 'utf8').matchAll(
        /\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)|require\(\s*'([^']+)'\s*\)/g,
      ),
    ].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
  const allowed = [
    /^node:/,
    /^\.\/[a-z-]+$/,
    /^\.\.\/base\/(environment|errors|limits|shape|time)$/,
    /^\.\.\/(contract|native|process|dispatch)\/index$/,
    /^\.\.\/dispatch\/diagnostics$/,
    /^\.\.\/store\/(execution-store|run-store|runner-store|dispatch-repository)$/,
  ];
  const files = readdirSync(path.join(LIB, 'execution')).filter((name) => name.endsWith('.ts'));
  t.true(files.length >= 10);
  for (const name of files) {
    for (const specifier of importsOf(path.join(LIB, 'execution', name)))
      t.true(
        allowed.some((rule) => rule.test(specifier)),
        `${name} imports ${specifier}`,
      );
  }
  const dist = path.resolve(__dirname, '..', '..', 'lib');
  const script = `require(${JSON.stringify(path.join(dist, 'execution', 'index.js'))}); require(${JSON.stringify(path.join(dist, 'store', 'sqlite', 'index.js'))}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`;
  const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
  t.true(loaded.some((file) => file.endsWith(path.join('execution', 'index.js'))));
  t.deepEqual(
    loaded.filter((file) => /[\\/]node_modules[\\/]pg[\\/]|[\\/]store[\\/]postgres[\\/]/.test(file)),
    [],
  );
  // The launcher runs once per job: it loads no store, no dispatch, no native addon.
  const launcherScript = `require(${JSON.stringify(path.join(dist, 'execution', 'receipts.js'))}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`;
  const launcherLoaded = JSON.parse(
    execFileSync(process.execPath, ['-e', launcherScript], { encoding: 'utf8' }),
  ) as string[];
  t.deepEqual(
    launcherLoaded.filter((file) =>
      /better-sqlite3|[\\/]store[\\/]|[\\/]dispatch[\\/]|[\\/]native[\\/]|node-gyp-build/.test(file),
    ),
    [],
  );
});
