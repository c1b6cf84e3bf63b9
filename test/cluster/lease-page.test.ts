// One lease page per worker tick (docs/decisions/0200) on a real PostgreSQL, as the runtime role:
// design/cluster's wrapper cases with several leases in one page and mixed answers, the lease rows
// written on changes of state only, and two replicas answering one worker's page at once.
import test from 'ava';

import type { Assignment } from '../../lib/cluster/index';
import { openContractStore } from '../helpers/stores';
import { clusterFixture, foreignDispatch } from './world';

const ready = clusterFixture('cluster_lease_page');

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test.serial(
  'cluster gates 1-8 in one page: renewed, stop settled, stop replayed, terminal, foreign lease, task timeout and lost fence, each with its own answer and event',
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await openContractStore(db);
    t.teardown(() => store.close());
    const replica = w.replica(store.repository);
    const { caller, refs } = await w.holding(6);
    const [renewing, cancelled, finished, foreign, timedOut, fenced] = refs as [
      Assignment,
      Assignment,
      Assignment,
      Assignment,
      Assignment,
      Assignment,
    ];
    // The task timeout's deadline has passed (as the control plane's clock would have it after timeoutMs).
    await db.owner.query('UPDATE attempts SET deadline_at_ms = 1 WHERE run_id = $1', [timedOut.runId]);
    const cancelledAt = await w.cancel(cancelled.runId);
    await w.leases.complete(caller, {
      ...finished,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
    });
    await foreignDispatch(store.repository, foreign, await w.cancel(foreign.runId));
    await sleep(20);
    const before = (
      await db.owner.query<{ updated: string }>(
        'SELECT updated_at_ms AS updated FROM run_dispatch_leases WHERE run_id = $1',
        [renewing.runId],
      )
    ).rows[0]?.updated;

    const page = await replica.control.tickPage(caller, [
      renewing,
      cancelled,
      finished,
      foreign,
      timedOut,
      { ...fenced, fence: fenced.fence + 1 },
    ]);
    t.is(page.session, 'live');
    t.false(page.answers.has(renewing.runId), 'a plain renewal is not in the answer');
    t.like(page.answers.get(cancelled.runId), {
      kind: 'stop_requested',
      scope: 'run',
      stopAtMs: cancelledAt,
      tracking: 'dispatched',
    });
    t.deepEqual(page.answers.get(finished.runId), { kind: 'terminal' });
    t.deepEqual(page.answers.get(foreign.runId), { kind: 'unavailable', code: 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED' });
    t.like(page.answers.get(timedOut.runId), { kind: 'stop_requested', scope: 'attempt', tracking: 'untracked' });
    t.deepEqual(page.answers.get(fenced.runId), { kind: 'lost', reason: 'fence' });
    const after = (
      await db.owner.query<{ updated: string }>(
        'SELECT updated_at_ms AS updated FROM run_dispatch_leases WHERE run_id = $1',
        [renewing.runId],
      )
    ).rows[0]?.updated;
    t.is(after, before, 'the renewed lease row is not written: the session carries the heartbeat');
    t.true(replica.availability.state().ready, 'a foreign lease does not withdraw readiness');

    const replay = await replica.control.tickPage(caller, [renewing, cancelled]);
    t.like(replay.answers.get(cancelled.runId), { kind: 'stop_requested', tracking: 'dispatched' });
    t.deepEqual(await w.eventTypes(cancelled.runId), ['run.cancel_requested', 'run.cancel_dispatched']);
    t.deepEqual(await w.eventTypes(timedOut.runId), [], 'a task timeout writes no cancellation fact');
    t.deepEqual(await w.eventTypes(foreign.runId), ['run.cancel_requested']);
    t.like(await store.repository.getRecord(cancelled.runId), { status: 'dispatched', dispatchCount: 1 });
  },
);

test.serial(
  "cluster: a lapsed session's leases are marked unreachable by the reap, not failed; its fence holder's next page renews them and clears the mark once",
  async (t) => {
    const { database: db, world: w } = await ready;
    const { caller, refs } = await w.holding(2);
    await db.owner.query('UPDATE worker_sessions SET expires_at_ms = 1 WHERE id = $1', [caller.sessionId]);
    while ((await w.leases.reapExpired()) > 0);
    for (const ref of refs) {
      t.is((await w.runStore.getRun(ref.runId))?.status, 'running', 'the reap ends no run (docs/decisions/0270)');
      t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable']);
    }
    const page = await w.leases.tickPage(caller, refs);
    t.is(page.session, 'live', 'the holder answers again: its session renews (docs/decisions/0275)');
    t.is(page.answers.size, 0, 'each lease is a plain renewal');
    for (const ref of refs) t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable', 'run.reattached']);
    await w.leases.tickPage(caller, refs);
    for (const ref of refs)
      t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable', 'run.reattached'], 'the mark is cleared once');
    const marks = await db.owner.query(
      'SELECT 1 FROM run_dispatch_leases WHERE run_id = ANY($1::text[]) AND unreachable_at_ms IS NOT NULL',
      [refs.map((r) => r.runId)],
    );
    t.is(marks.rowCount, 0);
    t.deepEqual((await w.leases.tickPage({ ...caller, principal: 'CN=other' }, refs)).session, 'lost');
  },
);

test.serial(
  "cluster: two replicas answering one worker's page at once claim each stop exactly once; the other fails closed or replays, never a second event",
  async (t) => {
    const { database: db, world: w } = await ready;
    const store = await openContractStore(db);
    t.teardown(() => store.close());
    const replicaA = w.replica(store.repository, { ownerId: 'cp-a' });
    const replicaB = w.replica(store.repository, { ownerId: 'cp-b' });
    const { caller, refs } = await w.holding(4);
    for (const ref of refs) await w.cancel(ref.runId);
    const [a, b] = await Promise.all([
      replicaA.control.tickPage(caller, refs),
      replicaB.control.tickPage(caller, refs),
    ]);
    for (const ref of refs) {
      const answers = [a.answers.get(ref.runId), b.answers.get(ref.runId)];
      const released = answers.filter((answer) => answer?.kind === 'stop_requested');
      t.true(released.length >= 1, 'at least one replica released the stop');
      for (const answer of answers)
        t.true(
          answer?.kind === 'stop_requested' ||
            (answer?.kind === 'unavailable' && answer.code === 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED'),
        );
      t.like(await store.repository.getRecord(ref.runId), { status: 'dispatched', dispatchCount: 1 });
      t.is((await w.eventTypes(ref.runId)).filter((type) => type === 'run.cancel_dispatched').length, 1);
    }
  },
);

test.serial('cluster: bad pages are typed errors and change nothing', async (t) => {
  const { world: w } = await ready;
  const { caller, refs } = await w.holding(1);
  const ref = refs[0] as Assignment;
  await t.throwsAsync(w.leases.tickPage(caller, [ref, ref]), { code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST' });
  await t.throwsAsync(w.leases.pullPage(caller, 0), { code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST' });
  await t.throwsAsync(w.leases.tickPage(caller, [{ ...ref, fence: 0 }]), {
    code: 'ERR_PIDFENCE_CLUSTER_INVALID_FENCE',
  });
});
