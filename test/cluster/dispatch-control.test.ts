// design/cluster's eight wrapper cases (docs/decisions/0101) on a real PostgreSQL, as the runtime role:
// the lease-control tick of a pulled assignment, wrapped by one replica's CancellationDispatchControl.
import test from 'ava';

import { DispatchFailedClosed } from '../../lib/cluster/index';
import { type MigratedDatabase } from '../helpers/pg-store';
import { openContractStore } from '../helpers/stores';
import { clusterFixture, foreignDispatch } from './world';

const ready = clusterFixture('cluster_gates');

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function contractStore(t: import('ava').ExecutionContext, db: MigratedDatabase) {
  const store = await openContractStore(db);
  t.teardown(() => store.close());
  return store;
}

async function failedClosedCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DispatchFailedClosed) return error.code;
    throw error;
  }
  throw new Error('the tick released an answer');
}

test.serial(
  'cluster gate 1: renewed and terminal bypass the wrapper: no dispatch row, no event, the lease expiry moves by the database clock',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository);
    const { caller, ref } = await w.assigned();
    const first = await replica.control.tick(caller, ref);
    await sleep(20);
    const second = await replica.control.tick(caller, ref);
    t.is(first.kind, 'renewed');
    t.is(second.kind, 'renewed');
    if (first.kind === 'renewed' && second.kind === 'renewed') t.true(second.expiresAtMs > first.expiresAtMs);
    t.is(await store.repository.getRecord(ref.runId), null);
    t.deepEqual(
      replica.observations.map((o) => o.kind),
      ['bypass', 'bypass'],
    );

    await w.leases.complete(caller, {
      ...ref,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
    });
    t.deepEqual(await replica.control.tick(caller, ref), { kind: 'terminal' });
    t.is(await store.repository.getRecord(ref.runId), null);
    t.deepEqual(await w.eventTypes(ref.runId), ['run.terminal']);
    t.true(replica.availability.state().ready);
  },
);

test.serial(
  'cluster gate 2: stop_requested is settled termination_requested with one run.cancel_dispatched before the stop is released',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository);
    const { caller, ref } = await w.assigned();
    const cancelledAtMs = await w.cancel(ref.runId);
    const answer = await replica.control.tick(caller, ref);
    t.like(answer, { kind: 'stop_requested', scope: 'run', stopAtMs: cancelledAtMs, tracking: 'dispatched' });
    const record = await store.repository.getRecord(ref.runId);
    t.like(record, {
      status: 'dispatched',
      lastResult: 'termination_requested',
      attemptId: ref.attemptId,
      dispatchCount: 1,
    });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.cancel_requested', 'run.cancel_dispatched']);
    t.deepEqual(replica.observations, [{ kind: 'settled', code: null, scope: 'run' }]);
  },
);

test.serial(
  'cluster gate 3: a replayed stop tick gets the same stop from the durable dispatched record and writes no second event',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replicaA = w.replica(store.repository);
    const replicaB = w.replica(store.repository);
    const { caller, ref } = await w.assigned();
    await w.cancel(ref.runId);
    const first = await replicaA.control.tick(caller, ref);
    const version = (await store.repository.getRecord(ref.runId))?.version;
    const replayed = await replicaB.control.tick(caller, ref);
    const again = await replicaA.control.tick(caller, ref);
    t.like(replayed, { kind: 'stop_requested', tracking: 'dispatched' });
    if (first.kind === 'stop_requested' && replayed.kind === 'stop_requested') t.is(replayed.stopAtMs, first.stopAtMs);
    t.like(again, { kind: 'stop_requested', tracking: 'dispatched' });
    t.is((await store.repository.getRecord(ref.runId))?.version, version);
    t.is((await w.eventTypes(ref.runId)).filter((type) => type === 'run.cancel_dispatched').length, 1);
    t.deepEqual(
      replicaB.observations.map((o) => o.kind),
      ['replayed'],
    );
  },
);

test.serial(
  "cluster gate 4: another replica's live dispatch lease, or a retry not yet due, fails closed: no stop, a fixed code; readiness stays (another replica delivers, docs/decisions/0202)",
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository);

    const leased = await w.assigned();
    const leasedAt = await w.cancel(leased.ref.runId);
    await foreignDispatch(store.repository, leased.ref, leasedAt);
    t.is(
      await failedClosedCode(replica.control.tick(leased.caller, leased.ref)),
      'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED',
    );
    t.deepEqual(replica.availability.state(), { ready: true, code: null });
    t.deepEqual(await w.eventTypes(leased.ref.runId), ['run.cancel_requested']);

    const waiting = await w.assigned();
    const waitingAt = await w.cancel(waiting.ref.runId);
    await foreignDispatch(store.repository, waiting.ref, waitingAt, 'dispatch_error');
    t.is(
      await failedClosedCode(replica.control.tick(waiting.caller, waiting.ref)),
      'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE',
    );
    t.deepEqual(replica.availability.state(), { ready: true, code: null });
    t.is((await w.eventTypes(waiting.ref.runId)).filter((type) => type === 'run.cancel_dispatched').length, 0);
    t.deepEqual(
      replica.observations.map((o) => [o.kind, o.code]),
      [
        ['failed_closed', 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED'],
        ['failed_closed', 'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE'],
      ],
    );
  },
);

test.serial(
  'cluster gate 5: a blocked dispatch fails closed with its code and readiness withdrawn; a later settled stop restores readiness',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository);
    const blocked = await w.assigned();
    const at = await w.cancel(blocked.ref.runId);
    await foreignDispatch(store.repository, blocked.ref, at, 'identity_mismatch');
    t.is(
      await failedClosedCode(replica.control.tick(blocked.caller, blocked.ref)),
      'ERR_PIDFENCE_CLUSTER_DISPATCH_BLOCKED',
    );
    t.deepEqual(replica.availability.state(), { ready: false, code: 'ERR_PIDFENCE_CLUSTER_DISPATCH_BLOCKED' });

    const healthy = await w.assigned();
    await w.cancel(healthy.ref.runId);
    t.like(await replica.control.tick(healthy.caller, healthy.ref), { kind: 'stop_requested', tracking: 'dispatched' });
    t.deepEqual(replica.availability.state(), { ready: true, code: null });
  },
);

test.serial(
  'cluster gate 6: a task timeout (attempt deadline, no run cancel intent) releases the stop untracked and writes no cancellation fact',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository);
    const { caller, ref } = await w.assigned({ timeoutMs: 1 });
    await sleep(10);
    const answer = await replica.control.tick(caller, ref);
    t.like(answer, { kind: 'stop_requested', scope: 'attempt', tracking: 'untracked' });
    t.is(await store.repository.getRecord(ref.runId), null);
    t.is((await w.runStore.getRun(ref.runId))?.cancelRequestedAtMs, null);
    t.deepEqual(await w.eventTypes(ref.runId), []);
    t.deepEqual(replica.observations, [{ kind: 'untracked', code: null, scope: 'attempt' }]);
    t.true(replica.availability.state().ready);
  },
);

test.serial(
  'cluster gate 7: when the settlement cannot commit, no stop is released; after the replica lease runs out a tick settles it once',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository, { leaseDurationMs: 1_500 });
    const { caller, ref } = await w.assigned();
    await w.cancel(ref.runId);
    const restore = await store.injectEventAppendFailure();
    t.is(await failedClosedCode(replica.control.tick(caller, ref)), 'ERR_PIDFENCE_CLUSTER_SETTLE_FAILED');
    await restore();
    t.like(await store.repository.getRecord(ref.runId), { status: 'leased', lastResult: null });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.cancel_requested']);
    t.deepEqual(replica.availability.state(), { ready: false, code: 'ERR_PIDFENCE_CLUSTER_SETTLE_FAILED' });
    // Within the replica's own lease the dispatch is still `leased`: fail closed again, no stop.
    t.is(await failedClosedCode(replica.control.tick(caller, ref)), 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED');
    await sleep(1_600);
    t.like(await replica.control.tick(caller, ref), { kind: 'stop_requested', tracking: 'dispatched' });
    t.like(await store.repository.getRecord(ref.runId), {
      status: 'dispatched',
      lastResult: 'termination_requested',
      dispatchCount: 2,
    });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.cancel_requested', 'run.cancel_dispatched']);
    t.true(replica.availability.state().ready);
  },
);

test.serial(
  'cluster gate 8: a configuration failure keeps renewals flowing but fails every stop closed and keeps readiness withdrawn',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await contractStore(t, db);
    const replica = w.replica(store.repository, { ownerId: '', holdMs: 1 });
    const { caller, ref } = await w.assigned();
    t.is((await replica.control.tick(caller, ref)).kind, 'renewed');
    await w.cancel(ref.runId);
    t.is(await failedClosedCode(replica.control.tick(caller, ref)), 'ERR_PIDFENCE_CLUSTER_CONFIG');
    await sleep(5);
    t.deepEqual(replica.availability.state(), { ready: false, code: 'ERR_PIDFENCE_CLUSTER_CONFIG' });
    // Only the pending record the cancel wrote (docs/decisions/0022): never claimed.
    t.like(await store.repository.getRecord(ref.runId), { status: 'pending', dispatchCount: 0, leaseOwner: null });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.cancel_requested']);
    const badLease = w.replica(store.repository, { leaseDurationMs: 10 });
    t.is(await failedClosedCode(badLease.control.tick(caller, ref)), 'ERR_PIDFENCE_CLUSTER_CONFIG');
  },
);

test.serial('cluster: an observer that throws changes no answer', async (t) => {
  const { database: db, world: w } = await ready;
  const store = await contractStore(t, db);
  const { CancellationDispatchControl, DispatchAvailability } = await import('../../lib/cluster/index');
  const control = new CancellationDispatchControl(w.leases, store.repository, {
    replicaOwnerId: 'cp-observed',
    leaseDurationMs: 10_000,
    availability: new DispatchAvailability(1_000),
    observe: () => {
      throw new Error('observer down');
    },
  });
  const { caller, ref } = await w.assigned();
  await w.cancel(ref.runId);
  t.like(await control.tick(caller, ref), { kind: 'stop_requested', tracking: 'dispatched' });
});
