// Supervisor (design/dispatch §2.6, §6 gates 5, 6, 7, 9): bounded cycles over the real store's due pages,
// failing closed on a page that breaks the keyset contract; idle cycles write nothing.
import test from 'ava';

import {
  DUE_PAGE_MAX,
  PAGES_PER_CYCLE_MAX,
  backoffDelayMs,
  type DuePage,
  type DuePageQuery,
} from '../../lib/contract/index';
import { Supervisor, SupervisorCycleError, type CycleReport } from '../../lib/dispatch/index';
import { signalVerified } from '../../lib/native/index';
import { LocalProcessController } from '../../lib/process/index';
import type { DispatchRepository } from '../../lib/store/dispatch-repository';
import { timerCensus } from '../helpers/timer-census';
import { storeFactories, openFirstStore, type TestStore } from '../helpers/stores';
import {
  CountingController,
  LEASE_MS,
  ThrowingController,
  cancelledRunFor,
  dispatcherFor,
  handleOf,
  startJob,
} from './world';
import { uniqueId } from '../helpers/unique-id';
import { cancelledRun } from '../helpers/cancelled-runs';

/** The real repository, with its due pages bent by `bend` (a real delegating object, not a mock). */
function bentRepository(
  repository: DispatchRepository,
  bend: (page: DuePage, call: number) => DuePage,
): Pick<DispatchRepository, 'duePage'> {
  let call = 0;
  return { duePage: async (query?: DuePageQuery) => bend(await repository.duePage(query), call++) };
}

// The SQLite test clock is real time plus the offset the test adds (child processes share it),
// so the backoff windows these tests look into are a minute wide: seconds of load between two
// steps cannot move a retry across its due time.
const SLOW_BACKOFF = { baseMs: 60_000, maxMs: 60 * 60 * 1000 } as const;

const EMPTY_REPORT: CycleReport = {
  pages: 1,
  items: 0,
  dispatched: 0,
  blocked: 0,
  retryWait: 0,
  staleFence: 0,
  notClaimed: 0,
  completedFirst: 0,
  budgetExhausted: false,
  controllerFailures: [],
};

for (const factory of storeFactories) {
  const name = factory.name;
  const withStore = (title: string, body: (t: import('ava').ExecutionContext, store: TestStore) => Promise<void>) =>
    test(`${title} [${name}]`, async (t) => {
      const store = await factory.open();
      t.teardown(() => store.close());
      await body(t, store);
    });
  // Gates 5, 6 and 7 move the store's clock by minutes: SQLite's injected clock, PostgreSQL's
  // test-only one (test/helpers/pg-test-clock.ts), so they run on every store.

  withStore(
    'gate 5: a retry_wait run is not dispatched before its due time, and is after it with dispatch_count 2',
    async (t, store) => {
      const job = startJob(t);
      const target = await cancelledRunFor(store, job);
      const throwing = new ThrowingController();
      const first = new Supervisor({
        repository: store.repository,
        dispatcher: dispatcherFor(store, [throwing], { backoff: SLOW_BACKOFF }),
      });
      t.like(await first.runCycle(), { items: 1, retryWait: 1 });
      const counting = new CountingController();
      const supervisor = new Supervisor({
        repository: store.repository,
        dispatcher: dispatcherFor(store, [counting], { backoff: SLOW_BACKOFF }),
      });
      await store.advanceTime(backoffDelayMs(1, SLOW_BACKOFF) - 5_000);
      t.deepEqual(await supervisor.runCycle(), EMPTY_REPORT, 'not due yet: nothing claimed');
      t.is(counting.calls, 0);
      await store.advanceTime(10_000);
      t.like(await supervisor.runCycle(), { items: 1, dispatched: 1 });
      t.is(counting.calls, 1);
      t.like(await store.repository.getRecord(target.runId), {
        status: 'dispatched',
        dispatchCount: 2,
        lastResult: 'termination_requested',
      });
      t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
    },
  );

  withStore('gate 6: dispatched, blocked and terminal runs never reach the controller again', async (t, store) => {
    const counting = new CountingController();
    const supervisor = new Supervisor({ repository: store.repository, dispatcher: dispatcherFor(store, [counting]) });
    const dispatchedJob = startJob(t);
    const blockedJob = startJob(t);
    const terminalJob = startJob(t);
    const dispatched = await cancelledRunFor(store, dispatchedJob);
    // The Attempt's PID differs from the handle's: the real controller answers pid_mismatch → blocked.
    const blocked = await cancelledRun(store.runStore, {
      running: { pid: blockedJob.identity.pid === 1 ? 2 : blockedJob.identity.pid - 1, handle: handleOf(blockedJob) },
    });
    const terminal = await cancelledRunFor(store, terminalJob);
    await store.runStore.markTerminal({
      runId: terminal.runId,
      status: 'failed',
      eventId: uniqueId('evt'),
      attemptId: terminal.attemptId,
    });

    t.like(await supervisor.runCycle(), { items: 2, dispatched: 1, blocked: 1 });
    t.is(counting.calls, 2);
    for (let i = 0; i < 3; i += 1) {
      await store.advanceTime(LEASE_MS + backoffDelayMs(20));
      t.deepEqual(await supervisor.runCycle(), EMPTY_REPORT);
    }
    t.is(counting.calls, 2, 'no further controller call, however much time passes');
    t.like(await store.repository.getRecord(dispatched.runId), { status: 'dispatched', dispatchCount: 1 });
    t.like(await store.repository.getRecord(blocked.runId), {
      status: 'blocked',
      lastResult: 'pid_mismatch',
      dispatchCount: 1,
    });
    // The pending record the cancel wrote (docs/decisions/0022) is never leased.
    t.like(
      await store.repository.getRecord(terminal.runId),
      { status: 'pending', dispatchCount: 0, leaseOwner: null },
      'a terminal run is never claimed',
    );
    t.is(
      signalVerified(blockedJob.identity, 0, { group: true }).kind,
      'signalled',
      'the blocked job was never signalled',
    );
  });

  withStore(
    'gate 7: controller missing, handle missing and a transient error keep their backoff across a restart',
    async (t, store) => {
      const job = startJob(t);
      const noHandle = await cancelledRun(store.runStore, { running: {} });
      const noController = await cancelledRunFor(store, job);
      await new Supervisor({
        repository: store.repository,
        dispatcher: dispatcherFor(store, [], { backoff: SLOW_BACKOFF }),
      }).runCycle();
      const transient = await cancelledRunFor(store, job);
      await new Supervisor({
        repository: store.repository,
        dispatcher: dispatcherFor(store, [new ThrowingController()], { backoff: SLOW_BACKOFF }),
      }).runCycle();
      const results = await Promise.all(
        [noHandle, noController, transient].map(async (r) => (await store.repository.getRecord(r.runId))?.lastResult),
      );
      t.deepEqual(results, ['handle_missing', 'controller_missing', 'dispatch_error']);

      await store.restart();
      const counting = new CountingController();
      const supervisor = new Supervisor({
        repository: store.repository,
        dispatcher: dispatcherFor(store, [counting], { backoff: SLOW_BACKOFF }),
      });
      t.deepEqual(await supervisor.runCycle(), EMPTY_REPORT, 'after the restart the backoff still holds');
      for (const r of [noHandle, noController, transient])
        t.is((await store.repository.getRecord(r.runId))?.status, 'retry_wait');
      await store.advanceTime(backoffDelayMs(1, SLOW_BACKOFF) + 10);
      const report = await supervisor.runCycle();
      t.is(report.items, 3);
      t.is(counting.calls, 2, 'the two runs with a handle reach the controller');
      t.like(await store.repository.getRecord(noHandle.runId), {
        status: 'retry_wait',
        dispatchCount: 2,
        lastResult: 'handle_missing',
      });
      const again = await store.repository.getRecord(noHandle.runId);
      t.is(
        again?.nextAttemptAtMs,
        (again?.updatedAtMs ?? 0) + backoffDelayMs(2, SLOW_BACKOFF),
        'the delay doubles with dispatch_count',
      );
    },
  );

  withStore('gate 9: a cycle stops at its page budget; the rest waits for the next cycle', async (t, store) => {
    const targets = [];
    for (let i = 0; i < 7; i += 1) targets.push(await cancelledRun(store.runStore, { running: {} }));
    // No handles: each dispatch is a cheap handle_missing, no process needed. The slow backoff keeps
    // the six retried ones from coming due again however long the first cycle takes under load.
    const supervisor = new Supervisor({
      repository: store.repository,
      dispatcher: dispatcherFor(store, [], { backoff: SLOW_BACKOFF }),
      pageSize: 2,
      pagesPerCycle: 3,
    });
    t.like(await supervisor.runCycle(), { pages: 3, items: 6, retryWait: 6, budgetExhausted: true });
    t.like(await supervisor.runCycle(), { pages: 1, items: 1, retryWait: 1, budgetExhausted: false });
  });

  withStore('gate 9: page size and pages per cycle beyond their hard limits are refused', async (t, store) => {
    const dispatcher = dispatcherFor(store, []);
    for (const bad of [{ pageSize: DUE_PAGE_MAX + 1 }, { pageSize: 0 }, { pageSize: 1.5 }]) {
      t.throws(() => new Supervisor({ repository: store.repository, dispatcher, ...bad }), {
        code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT',
      } as never);
    }
    for (const bad of [{ pagesPerCycle: PAGES_PER_CYCLE_MAX + 1 }, { pagesPerCycle: 0 }]) {
      t.throws(() => new Supervisor({ repository: store.repository, dispatcher, ...bad }), {
        code: 'ERR_PIDFENCE_INVALID_CYCLE_LIMIT',
      } as never);
    }
    const max = new Supervisor({
      repository: store.repository,
      dispatcher,
      pageSize: DUE_PAGE_MAX,
      pagesPerCycle: PAGES_PER_CYCLE_MAX,
    });
    t.deepEqual([max.pageSize, max.pagesPerCycle], [64, 64]);
    const defaults = new Supervisor({ repository: store.repository, dispatcher });
    t.deepEqual([defaults.pageSize, defaults.pagesPerCycle], [32, 4]);
  });

  const failClosed: ReadonlyArray<[string, string, (page: DuePage, call: number) => DuePage]> = [
    [
      'an overflowing page',
      'ERR_PIDFENCE_CYCLE_PAGE_OVERFLOW',
      (page, call) => (call === 1 ? { ...page, items: [...page.items, ...page.items.slice(0, 1)] } : page),
    ],
    [
      'a full page without a cursor',
      'ERR_PIDFENCE_CYCLE_CURSOR_MISSING',
      (page, call) => (call === 1 ? { ...page, next: null } : page),
    ],
    [
      'a cursor that does not advance',
      'ERR_PIDFENCE_CYCLE_CURSOR_STUCK',
      (page, call) => (call === 1 ? { ...page, next: { atMs: -1, runId: '' } } : page),
    ],
    [
      'a page that repeats the previous one',
      'ERR_PIDFENCE_CYCLE_CURSOR_STUCK',
      (() => {
        let first: DuePage | null = null;
        return (page: DuePage, call: number) => {
          if (call === 0) first = page;
          return call === 1 && first !== null ? first : page;
        };
      })(),
    ],
  ];
  for (const [what, code, bend] of failClosed) {
    withStore(`${what} fails the cycle closed: nothing of that page is dispatched`, async (t, store) => {
      for (let i = 0; i < 6; i += 1) await cancelledRun(store.runStore, { running: {} });
      const dispatcher = dispatcherFor(store, []);
      let dispatched = 0;
      const counted = {
        dispatch: async (item: Parameters<typeof dispatcher.dispatch>[0]) => {
          dispatched += 1;
          return dispatcher.dispatch(item);
        },
      };
      const supervisor = new Supervisor({
        repository: bentRepository(store.repository, bend),
        dispatcher: counted,
        pageSize: 2,
        pagesPerCycle: 4,
      });
      const error = await t.throwsAsync(supervisor.runCycle(), { instanceOf: SupervisorCycleError });
      t.is((error as SupervisorCycleError).code, code);
      t.regex(error?.message ?? '', /nothing of this page was dispatched/);
      t.is(dispatched, 2, 'only the first, valid page was dispatched');
    });
  }

  withStore('idle is free: a cycle with nothing due runs one read and no write', async (t, store) => {
    const supervisor = new Supervisor({
      repository: store.repository,
      dispatcher: dispatcherFor(store, [new LocalProcessController()]),
    });
    // Something settled and something backing off exist, but nothing is due.
    await cancelledRun(store.runStore, { running: {} });
    await supervisor.runCycle();
    const before = await store.writeMarker();
    for (let i = 0; i < 5; i += 1) t.deepEqual(await supervisor.runCycle(), EMPTY_REPORT);
    t.is(await store.writeMarker(), before, 'no write transaction, no changed row, no WAL growth');
  });
}

test.serial("the supervisor creates no timer: its cycles create none, not even an unref'd one", async (t) => {
  const store = await openFirstStore(t);
  await cancelledRun(store.runStore, { running: {} });
  const census = timerCensus();
  t.teardown(() => census.disable());
  const supervisor = new Supervisor({ repository: store.repository, dispatcher: dispatcherFor(store, []) });
  t.like(await supervisor.runCycle(), { items: 1 });
  t.deepEqual(await supervisor.runCycle(), EMPTY_REPORT);
  t.is(census.created, 0, "no timer, not even an unref'd one");
});
