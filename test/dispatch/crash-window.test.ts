// The crash window of design/dispatch §2.5, for real: a dispatcher in a child process signals and is
// killed before its result commits; a second dispatcher in this process takes over only after the
// lease expired, re-verifies, and settles; the dead owner's result, replayed late, is fenced.
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import type { DispatchFence } from '../../lib/dispatch/index';
import { spawnJob, spawnRecorder, type Job } from '../helpers/processes';
import { storeFactories, type TestStore } from '../helpers/stores';
import { CountingController, LEASE_MS, cancelledRunFor, dispatcherFor, type Target } from './world';
import { uniqueId } from '../helpers/unique-id';

const CHILD = path.resolve(__dirname, 'crash-dispatcher-child.js');

/** Starts the crashing dispatcher as its own group leader, so the test can stop it verified. */
function crashingDispatcher(
  t: ExecutionContext,
  factoryName: string,
  store: TestStore,
  target: Target,
  graceMs: number,
  leaseMs: number,
): Job {
  return spawnJob(t, process.execPath, [
    CHILD,
    factoryName,
    store.location,
    target.runId,
    target.attemptId,
    String(target.cancelRequestedAtMs),
    String(graceMs),
    String(leaseMs),
  ]);
}

async function fenceOf(child: Job): Promise<DispatchFence> {
  return JSON.parse((await child.waitForLine(/^(fence|error) /, 20_000)).replace(/^fence /, '')) as DispatchFence;
}

async function replayIsFenced(
  t: ExecutionContext,
  store: TestStore,
  fence: DispatchFence,
  runId: string,
): Promise<void> {
  const before = { record: await store.repository.getRecord(runId), events: await store.runStore.listEvents(runId) };
  t.deepEqual(
    await store.repository.recordResult({ ...fence, result: 'termination_requested', eventId: uniqueId('evt') }),
    { kind: 'stale_fence' },
  );
  t.deepEqual(
    { record: await store.repository.getRecord(runId), events: await store.runStore.listEvents(runId) },
    before,
    'the late result changed nothing',
  );
}

for (const factory of storeFactories) {
  test(`crash after the signal, before the commit: the next owner takes over after expiry and records already_exited [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = spawnJob(t, 'sleep', ['30']);
    const target = await cancelledRunFor(store, job);
    const childLeaseMs = LEASE_MS;
    const child = crashingDispatcher(t, factory.name, store, target, 200, childLeaseMs);
    const fence = await fenceOf(child);
    t.is(await child.waitForLine(/^(after-controller|error) /, 20_000), 'after-controller termination_requested');
    t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' }, 'the signal was sent');
    await child.stop();
    t.deepEqual(await child.exited, { code: null, signal: 'SIGKILL' }, 'the owner died before committing');
    t.like(await store.repository.getRecord(target.runId), { status: 'leased', dispatchCount: 1, lastResult: null });

    const counting = new CountingController();
    const next = dispatcherFor(store, [counting], { owner: 'takeover-owner' });
    t.deepEqual(
      await next.dispatch(target),
      { kind: 'not_claimed', claim: 'leased' },
      'no takeover while the lease lives',
    );
    t.is(counting.calls, 0);
    await store.advanceTime(childLeaseMs + 1);
    t.deepEqual(await next.dispatch(target), {
      kind: 'recorded',
      result: 'already_exited',
      status: 'dispatched',
      dispatchCount: 2,
      controllerFailure: null,
    });
    t.is(counting.calls, 1, 're-verified through the controller');
    const events = (await store.runStore.listEvents(target.runId)).filter((e) => e.type !== 'run.cancel_requested');
    t.deepEqual(
      events.map((e) => [e.type, e.payload]),
      [['run.cancel_dispatched', { attemptId: target.attemptId, dispatchCount: 2, result: 'already_exited' }]],
    );
    await replayIsFenced(t, store, fence, target.runId);
  });

  test(`crash during the grace period: the next owner signals the same proven process again [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = await spawnRecorder(t); // traps TERM: only KILL ends it
    const target = await cancelledRunFor(store, job);
    const childGraceMs = 8_000;
    const childLeaseMs = 12_000;
    const child = crashingDispatcher(t, factory.name, store, target, childGraceMs, childLeaseMs);
    const fence = await fenceOf(child);
    await job.waitForLine(/^leader-TERM/, 20_000);
    await child.stop();
    t.deepEqual(await child.exited, { code: null, signal: 'SIGKILL' }, 'the owner died inside its grace period');
    t.is(job.lines.filter((line) => line === 'leader-TERM').length, 1);

    const counting = new CountingController();
    const next = dispatcherFor(store, [counting], { owner: 'takeover-owner' });
    t.deepEqual(await next.dispatch(target), { kind: 'not_claimed', claim: 'leased' });
    await store.advanceTime(childLeaseMs + 1);
    t.deepEqual(await next.dispatch(target), {
      kind: 'recorded',
      result: 'termination_requested',
      status: 'dispatched',
      dispatchCount: 2,
      controllerFailure: null,
    });
    t.is(counting.calls, 1);
    t.deepEqual(
      await job.exited,
      { code: null, signal: 'SIGKILL' },
      'the same process, still alive and proven, was stopped',
    );
    t.is(job.lines.filter((line) => line === 'leader-TERM').length, 2, 'TERM again, then KILL after the grace');
    await replayIsFenced(t, store, fence, target.runId);
  });
}
