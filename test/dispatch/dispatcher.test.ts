// Dispatcher (design/dispatch §2.3-2.5, §6 gates 1, 7, 10) on every store of stores.ts, with real
// processes behind the real LocalProcessController.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { PidfenceRangeError } from '../../lib/base/errors';
import { RETRY_DELAY_MAX_MS, backoffDelayMs } from '../../lib/contract/index';
import {
  ControllerRegistry,
  Dispatcher,
  LEASE_SETTLE_MARGIN_MS,
  STOP_CONCURRENCY_DEFAULT,
  defaultOwnerId,
  pageLeaseMs,
} from '../../lib/dispatch/index';
import { signalVerified } from '../../lib/native/index';
import { LocalProcessController } from '../../lib/process/index';
import { fixturesDir, spawnJob, type Job } from '../helpers/processes';
import { storeFactories, type TestStore } from '../helpers/stores';
import { tempFile } from '../helpers/temp-file';
import {
  CountingController,
  GRACE_MS,
  LEASE_MS,
  SECRET_TEXT,
  ThrowingController,
  cancelledRunFor,
  type Target,
  dispatcherFor,
  startJob,
} from './world';
import { cancelledRun } from '../helpers/cancelled-runs';

for (const factory of storeFactories) {
  const name = factory.name;

  test(`gate 1: two dispatchers on two connections race for one run; the controller is called once [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const other = await store.connect();
    const job = startJob(t);
    const target = await cancelledRunFor(store, job);
    const counting = new CountingController();
    const a = dispatcherFor(store, [counting], { owner: 'worker-a' });
    const b = dispatcherFor(other, [counting], { owner: 'worker-b' });

    const outcomes = await Promise.all([a.dispatch(target), b.dispatch(target)]);
    t.is(counting.calls, 1, 'exactly one controller call');
    t.is(outcomes.filter((o) => o.kind === 'recorded').length, 1);
    t.true(outcomes.some((o) => o.kind === 'not_claimed' && (o.claim === 'leased' || o.claim === 'dispatched')));
    t.like(
      outcomes.find((o) => o.kind === 'recorded'),
      { result: 'termination_requested', status: 'dispatched', dispatchCount: 1 },
    );
    t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
  });

  test(`a claimed run is settled with the exact fence: dispatched, lease cleared, one low-sensitivity event [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    const target = await cancelledRunFor(store, job);
    const dispatcher = dispatcherFor(store, [new LocalProcessController()], { owner: 'worker-a' });
    t.deepEqual(await dispatcher.dispatch(target), {
      kind: 'recorded',
      result: 'termination_requested',
      status: 'dispatched',
      dispatchCount: 1,
      controllerFailure: null,
    });
    t.like(await store.repository.getRecord(target.runId), {
      status: 'dispatched',
      leaseOwner: null,
      leaseTokenDigest: null,
      lastResult: 'termination_requested',
    });
    const events = await store.runStore.listEvents(target.runId);
    const last = events[events.length - 1];
    t.is(last?.type, 'run.cancel_dispatched');
    t.deepEqual(Object.keys(last?.payload as object).sort(), ['attemptId', 'dispatchCount', 'result']);
    t.false(JSON.stringify(events).includes(String(job.identity.pid)), 'no PID in any event');
    t.false(JSON.stringify(events).includes(job.identity.bootId), 'no handle in any event');
    t.false(JSON.stringify(events).includes('worker-a'), 'no owner in any event');
    t.deepEqual(await dispatcher.dispatch(target), { kind: 'not_claimed', claim: 'dispatched' }, 'never again');
  });

  test(`gate 7: handle missing, controller missing and a thrown controller error back off with the contract's delay [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    const noHandle = await cancelledRun(store.runStore, { running: {} });
    const noController = await cancelledRunFor(store, job);
    const throwing = new ThrowingController();
    const thrown = await cancelledRunFor(store, job);

    t.like(await dispatcherFor(store, [new CountingController()]).dispatch(noHandle), {
      kind: 'recorded',
      result: 'handle_missing',
      status: 'retry_wait',
    });
    t.like(await dispatcherFor(store, []).dispatch(noController), {
      kind: 'recorded',
      result: 'controller_missing',
      status: 'retry_wait',
    });
    t.like(await dispatcherFor(store, [throwing]).dispatch(thrown), {
      kind: 'recorded',
      result: 'dispatch_error',
      status: 'retry_wait',
    });
    t.is(throwing.calls, 1);
    for (const target of [noHandle, noController, thrown]) {
      const record = await store.repository.getRecord(target.runId);
      t.is(
        record?.nextAttemptAtMs,
        (record?.updatedAtMs ?? 0) + backoffDelayMs(1),
        'first retry after the contract backoff for dispatch_count 1',
      );
      const events = await store.runStore.listEvents(target.runId);
      t.is(events[events.length - 1]?.type, 'run.cancel_dispatch_failed');
      t.false(JSON.stringify(events).includes('secret'), 'the error text never reaches an event');
      t.false(JSON.stringify(events).includes(SECRET_TEXT.slice(0, 6)));
    }
    t.is(
      signalVerified(job.identity, 0, { group: true }).kind,
      'signalled',
      'the job was never stopped: it still lives',
    );
  });

  test(`a handle that is not a JSON object with a platform is blocked as invalid, without a controller call [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const counting = new CountingController();
    const target = await cancelledRun(store.runStore, { running: { pid: 4242, handle: 'not-json' } });
    t.like(await dispatcherFor(store, [counting]).dispatch(target), {
      kind: 'recorded',
      result: 'invalid',
      status: 'blocked',
    });
    t.is(counting.calls, 0);
  });
}

test('the lease must outlast the controller bound plus the settle margin: a shorter one is refused at construction', (t) => {
  const registry = new ControllerRegistry([new LocalProcessController()]);
  const needed = LocalProcessController.boundMs(GRACE_MS) + LEASE_SETTLE_MARGIN_MS;
  const base = { repository: {} as never, runStore: {} as never, controllers: registry, graceMs: GRACE_MS };
  const error = t.throws(() => new Dispatcher({ ...base, leaseDurationMs: needed }), {
    instanceOf: PidfenceRangeError,
  });
  t.is((error as PidfenceRangeError).code, 'ERR_PIDFENCE_LEASE_TOO_SHORT');
  t.regex(error?.message ?? '', /Use a lease above \d+ ms or a shorter grace/);
  t.notThrows(() => new Dispatcher({ ...base, leaseDurationMs: needed + 1 }));
  t.true(LEASE_MS > needed, 'the tests themselves use a valid lease');
  // The longest grace needs a lease the contract still allows.
  t.throws(() => new Dispatcher({ ...base, graceMs: 30_001, leaseDurationMs: 600_000 }), {
    code: 'ERR_PIDFENCE_INVALID_GRACE',
  } as never);
});

/** Options of a dispatcher that is only constructed: no store, no controller. */
const UNWIRED = {
  repository: {} as never,
  runStore: {} as never,
  controllers: new ControllerRegistry([]),
  graceMs: GRACE_MS,
  leaseDurationMs: LEASE_MS,
};

test('gate 9: a backoff beyond the retry-delay hard limit and a lease beyond its maximum are refused', (t) => {
  t.throws(() => new Dispatcher({ ...UNWIRED, backoff: { baseMs: 1_000, maxMs: RETRY_DELAY_MAX_MS + 1 } }), {
    code: 'ERR_PIDFENCE_INVALID_BACKOFF',
  } as never);
  t.throws(() => new Dispatcher({ ...UNWIRED, leaseDurationMs: 10 * 60 * 1000 + 1 }), {
    code: 'ERR_PIDFENCE_INVALID_LEASE_DURATION',
  } as never);
  t.throws(() => new Dispatcher({ ...UNWIRED, owner: 'x'.repeat(129) }), {
    code: 'ERR_PIDFENCE_INVALID_OWNER',
  } as never);
});

test('the registry refuses two controllers for one platform and a malformed platform', (t) => {
  t.throws(() => new ControllerRegistry([new LocalProcessController(), new CountingController()]), {
    code: 'ERR_PIDFENCE_DUPLICATE_CONTROLLER',
  } as never);
  const bad = Object.assign(new CountingController(), {});
  Object.defineProperty(bad, 'platform', { value: 'Linux!' });
  t.throws(() => new ControllerRegistry([bad]), { code: 'ERR_PIDFENCE_INVALID_PLATFORM' } as never);
});

test('the default owner id is a valid, bounded owner and differs per dispatcher', (t) => {
  const a = defaultOwnerId();
  const b = defaultOwnerId();
  t.not(a, b);
  t.true(a.length <= 128);
  t.regex(a, /^[A-Za-z0-9][A-Za-z0-9._:@/-]*$/);
});

for (const factory of storeFactories) {
  test(`a page is claimed at once and settled at once, each item with its own controller call and fence; a lease that covers fewer items claims in chunks (docs/decisions/0023) [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const calls = { claimPage: 0, recordResults: 0 };
    // The real repository, with its page calls counted.
    const repository = Object.assign(Object.create(store.repository) as typeof store.repository, {
      claimPage: (command: Parameters<typeof store.repository.claimPage>[0]) => {
        calls.claimPage += 1;
        return store.repository.claimPage(command);
      },
      recordResults: (commands: Parameters<typeof store.repository.recordResults>[0]) => {
        calls.recordResults += 1;
        return store.repository.recordResults(commands);
      },
    });
    const perItem = LocalProcessController.boundMs(GRACE_MS) + LEASE_SETTLE_MARGIN_MS;
    for (const [leaseDurationMs, claimPageSize] of [
      [pageLeaseMs(LocalProcessController.boundMs(GRACE_MS), 3), 3],
      [perItem + 1, 1],
    ] as const) {
      calls.claimPage = 0;
      calls.recordResults = 0;
      const jobs = [startJob(t), startJob(t), startJob(t)];
      const targets = [];
      for (const job of jobs) targets.push(await cancelledRunFor(store, job));
      const counting = new CountingController();
      const dispatcher = dispatcherFor({ repository, runStore: store.runStore }, [counting], {
        leaseDurationMs,
        owner: `worker-${claimPageSize}`,
      });
      t.is(dispatcher.claimPageSize, claimPageSize);
      const heard: string[] = [];
      const outcomes = await dispatcher.dispatchPage(targets, (target) => heard.push(target.runId));
      t.deepEqual(
        outcomes.map((outcome) => outcome.kind === 'recorded' && outcome.status),
        ['dispatched', 'dispatched', 'dispatched'],
      );
      t.deepEqual(
        heard,
        targets.map((target) => target.runId),
        'each stop is heard in page order',
      );
      t.is(counting.calls, 3, 'one controller call per item');
      t.deepEqual(calls, { claimPage: 3 / claimPageSize, recordResults: 3 / claimPageSize });
      for (const job of jobs) t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
      for (const target of targets)
        t.like(await store.repository.getRecord(target.runId), {
          status: 'dispatched',
          dispatchCount: 1,
          leaseOwner: null,
        });
    }
  });
}

/** A grace far beyond a page mate's bounded wait: no job is KILLed, each ends by its own exit 0. */
const PAGE_MATE_GRACE_MS = 20_000;
const PAGE_MATES = 4;

/**
 * PAGE_MATES cancelled runs of test/fixtures/page-mate.sh jobs, each outliving its TERM until every
 * page mate has one too (bounded), and a dispatcher whose lease covers them as one claimed chunk.
 */
async function pageMates(t: ExecutionContext, store: TestStore) {
  const { file: marks, cleanup } = tempFile('pidfence-page-mates-', 'marks');
  t.teardown(cleanup);
  const dir = path.dirname(marks);
  const jobs = Array.from({ length: PAGE_MATES }, (_, i) =>
    spawnJob(t, 'sh', [path.join(fixturesDir, 'page-mate.sh'), dir, String(i), String(PAGE_MATES)]),
  );
  for (const job of jobs) await job.waitForLine(/^ready$/);
  const targets = [];
  for (const job of jobs) targets.push(await cancelledRunFor(store, job));
  const dispatcher = dispatcherFor(store, [new LocalProcessController()], {
    graceMs: PAGE_MATE_GRACE_MS,
    leaseDurationMs: pageLeaseMs(LocalProcessController.boundMs(PAGE_MATE_GRACE_MS), PAGE_MATES),
  });
  t.is(dispatcher.claimPageSize, PAGE_MATES, 'one claimed chunk');
  return { jobs, targets, dispatcher, dir };
}

/**
 * Every job ended by its own exit 0 after its TERM, and saw every page mate's TERM marker before it
 * wrote its exit marker: a page stopped one job after the other TERMs the next job only after the
 * previous one ended, so its first job sees only itself.
 */
async function allTermedBeforeAnyEnded(t: ExecutionContext, jobs: readonly Job[], dir: string): Promise<void> {
  for (const job of jobs) t.deepEqual(await job.exited, { code: 0, signal: null });
  t.deepEqual(
    jobs.map((_, i) => Number(readFileSync(path.join(dir, `exit.${i}`), 'utf8').trim())),
    jobs.map(() => jobs.length),
    "every job's TERM marker existed before any job wrote its exit marker",
  );
}

const STOPPED = { kind: 'recorded', result: 'termination_requested', status: 'dispatched', dispatchCount: 1 } as const;

for (const factory of storeFactories) {
  test(`the jobs of a claimed page are all TERMed before the first of them ends: their stops run side by side; outcomes in the page's order (docs/decisions/0350) [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const { jobs, targets, dispatcher, dir } = await pageMates(t, store);
    const heard: string[] = [];
    const outcomes = await dispatcher.dispatchPage(targets, (target) => heard.push(target.runId));
    t.deepEqual(
      heard,
      targets.map((target) => target.runId),
    );
    for (const outcome of outcomes) t.like(outcome, STOPPED);
    await allTermedBeforeAnyEnded(t, jobs, dir);
  });

  test(`a due page claimed as it is read stops its jobs side by side too (docs/decisions/0025, 0350) [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const { jobs, dispatcher, dir } = await pageMates(t, store);
    const { page, outcomes, passedOver } = await dispatcher.dispatchDuePage({ limit: PAGE_MATES });
    t.is(passedOver, 0);
    t.is(page.items.length, PAGE_MATES);
    t.is(outcomes.length, PAGE_MATES);
    for (const outcome of outcomes) t.like(outcome, STOPPED);
    await allTermedBeforeAnyEnded(t, jobs, dir);
  });
}

for (const factory of storeFactories) {
  test(`a stop of a page that fails starts no further stop, and the page fails only once the stops in flight ended (docs/decisions/0350) [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const jobs = [startJob(t), startJob(t), startJob(t), startJob(t)];
    const targets: Target[] = [];
    for (const job of jobs) targets.push(await cancelledRunFor(store, job));
    const counting = new CountingController();
    const answers: string[] = [];
    const dispatcher = dispatcherFor(store, [counting], {
      leaseDurationMs: pageLeaseMs(LocalProcessController.boundMs(GRACE_MS), jobs.length),
      stopConcurrency: 2,
      observer: { onControllerAnswer: (result) => answers.push(result) },
      testHooks: {
        afterClaim: (fence) => {
          if (fence.runId === targets[0]?.runId) throw new Error('the first stop failed');
        },
      },
    });
    await t.throwsAsync(dispatcher.dispatchPage(targets), { message: 'the first stop failed' });
    t.is(counting.calls, 1, 'only the stop already in flight beside the failed one was made');
    t.deepEqual(answers, ['termination_requested'], 'and it ended before the page failed');
    t.deepEqual(await jobs[1]?.exited, { code: null, signal: 'SIGTERM' });
    for (const job of [jobs[0], jobs[2], jobs[3]])
      t.is(signalVerified(job?.identity as Job['identity'], 0, { group: true }).kind, 'signalled', 'never stopped');
    for (const target of targets)
      t.like(await store.repository.getRecord(target.runId), { status: 'leased', dispatchCount: 1 }, 'nothing settled');
  });
}

test('a stop concurrency outside 1 to 64 is refused at construction', (t) => {
  for (const stopConcurrency of [0, 65, 1.5, '4'])
    t.throws(() => new Dispatcher({ ...UNWIRED, stopConcurrency: stopConcurrency as number }), {
      code: 'ERR_PIDFENCE_INVALID_STOP_CONCURRENCY',
    } as never);
  t.is(new Dispatcher(UNWIRED).stopConcurrency, STOP_CONCURRENCY_DEFAULT);
  t.is(new Dispatcher({ ...UNWIRED, stopConcurrency: 1 }).stopConcurrency, 1);
});
