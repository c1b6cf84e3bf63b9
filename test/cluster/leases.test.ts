// The cluster's PostgreSQL model (docs/decisions/0100): sessions, pull, the run-dispatch lease with
// its fence, the undecorated tick, completion and the reap of expired leases, as the runtime role.
import { randomUUID } from 'node:crypto';

import test from 'ava';

import { CLUSTER_LEASE_SQL } from '../../lib/store/postgres/cluster-lease-statements';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_leases', 300);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test.serial(
  'cluster: a pull grants one attempt under a fence from the database clock; no PID or handle is stored',
  async (t) => {
    const { database: db, world: w } = await ready;
    const { ref } = await w.assigned();
    const [clock] = (
      await db.owner.query<{ now: string }>(
        'SELECT floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now',
      )
    ).rows;
    t.true(ref.fence > 1_600_000_000_000 && ref.fence <= Number(clock?.now));
    t.is(ref.projectId, 'project-c', "the assignment names the run's project (docs/decisions/0104)");
    const attempt = await w.runStore.getAttempt(ref.runId, ref.attemptId);
    t.like(attempt, { status: 'running', pid: null, handle: null });
    t.is((await w.runStore.getRun(ref.runId))?.status, 'running');
  },
);

test.serial('cluster: a re-grant on the same run gets a larger fence, and the old fence is lost', async (t) => {
  const { database: db, world: w } = await ready;
  const { caller, ref } = await w.assigned();
  // The owner moves the clock of this lease forward by a day, as if an earlier grant came from a faster clock.
  await db.owner.query('UPDATE run_dispatch_leases SET fence = fence + 86400000 WHERE run_id = $1', [ref.runId]);
  // The production grant statement, at the current database time, on the same run.
  const [{ fence } = { fence: 0 }] = (
    await db.owner.query<{ fence: number }>(CLUSTER_LEASE_SQL.grantLease, [
      ref.runId,
      ref.attemptId,
      caller.sessionId,
      Date.now(),
      1_000,
      null,
    ])
  ).rows;
  t.is(Number(fence), ref.fence + 86_400_000 + 1, 'above the earlier fence although the clock is lower');
  t.deepEqual(await w.leases.tick(caller, ref), { kind: 'lost', reason: 'fence' });
});

test.serial('cluster: wrong fence, another session, another principal are lost; none renews the lease', async (t) => {
  const { world: w } = await ready;
  const { caller, ref } = await w.assigned();
  const other = await w.leases.registerSession('CN=worker-b');
  t.deepEqual(await w.leases.tick(caller, { ...ref, fence: ref.fence + 1 }), { kind: 'lost', reason: 'fence' });
  t.deepEqual(await w.leases.tick({ principal: 'CN=worker-b', sessionId: other }, ref), {
    kind: 'lost',
    reason: 'fence',
  });
  t.deepEqual(await w.leases.tick({ principal: 'CN=worker-b', sessionId: caller.sessionId }, ref), {
    kind: 'lost',
    reason: 'session',
  });
  t.like(
    await w.leases.complete(caller, {
      ...ref,
      fence: ref.fence - 1,
      status: 'succeeded',
      cause: 'receipt',
      exit: null,
    }),
    { kind: 'lost' },
  );
  t.is((await w.runStore.getRun(ref.runId))?.status, 'running');
});

test.serial(
  'cluster: a worker that stops ticking makes its run unreachable at the reap, not failed and not at a pull (docs/decisions/0270, 0422); its late tick renews and re-attaches the run',
  async (t) => {
    const { world: w } = await ready;
    const { caller, ref } = await w.assigned();
    await sleep(400);
    const survivor = await w.leases.registerSession('CN=worker-b');
    await w.leases.enqueueJob({ runId: `run-${randomUUID()}`, projectId: 'project-c', argv: ['true'] });
    await w.leases.pull({ principal: 'CN=worker-b', sessionId: survivor });
    t.deepEqual(await w.eventTypes(ref.runId), [], 'a pull reaps nothing (docs/decisions/0422)');
    await w.leases.reapExpired(); // the replica's timer
    t.is((await w.runStore.getRun(ref.runId))?.status, 'running', 'nobody proved its end');
    t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable']);
    await w.leases.reapExpired();
    t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable'], 'marked once');
    t.like(await w.leases.tick(caller, ref), { kind: 'renewed' });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.unreachable', 'run.reattached']);
    t.is((await w.leases.unreachableSince([ref.runId])).size, 0);
  },
);

test.serial(
  'cluster: an expired lease that nobody reaped yet is renewed for its holder (an outage costs no job, docs/decisions/0273)',
  async (t) => {
    const { world: w } = await ready;
    const { caller, ref } = await w.assigned();
    await sleep(400);
    t.like(await w.leases.tick(caller, ref), { kind: 'renewed' });
    t.deepEqual(await w.eventTypes(ref.runId), []);
  },
);

test.serial(
  'cluster: a completion from the lease holder ends the run once; a closed session pulls nothing',
  async (t) => {
    const { world: w } = await ready;
    const { caller, ref } = await w.assigned();
    t.deepEqual(
      await w.leases.complete(caller, {
        ...ref,
        status: 'succeeded',
        cause: 'receipt',
        exit: { exitCode: 0, signal: null },
      }),
      { kind: 'completed' },
    );
    t.deepEqual(
      await w.leases.complete(caller, {
        ...ref,
        status: 'failed',
        cause: 'receipt',
        exit: { exitCode: 1, signal: null },
      }),
      { kind: 'already_terminal' },
    );
    t.is((await w.runStore.getRun(ref.runId))?.status, 'succeeded');
    t.true(await w.leases.endSession(caller));
    t.deepEqual(await w.leases.pull(caller), { kind: 'session_closed' });
  },
);

test.serial('cluster: bad input is a typed error and changes nothing', async (t) => {
  const { world: w } = await ready;
  await t.throwsAsync(w.leases.enqueueJob({ runId: 'run-bad', projectId: 'p', argv: [] }), {
    code: 'ERR_PIDFENCE_CLUSTER_INVALID_JOB',
  });
  t.is(await w.runStore.getRun('run-bad'), null);
  await t.throwsAsync(w.leases.tick({ principal: '', sessionId: 'wks-x' }, { runId: 'r', attemptId: 'a', fence: 1 }), {
    code: 'ERR_PIDFENCE_CLUSTER_PRINCIPAL',
  });
  await t.throwsAsync(
    w.leases.tick({ principal: 'CN=a', sessionId: 'wks-x' }, { runId: 'r', attemptId: 'a', fence: 0 }),
    { code: 'ERR_PIDFENCE_CLUSTER_INVALID_FENCE' },
  );
});

test.serial(
  'cluster: a cancelled job that no worker pulled ends cancelled at once and is never handed out; a running one is left to its worker',
  async (t) => {
    const { world: w } = await ready;
    const runId = `run-${randomUUID()}`;
    await w.leases.enqueueJob({ runId, projectId: 'project-c', argv: ['true'] });
    await w.cancel(runId);
    t.true(await w.leases.cancelIfQueued(runId));
    t.is((await w.runStore.getRun(runId))?.status, 'cancelled');
    t.deepEqual(await w.eventTypes(runId), ['run.cancel_requested', 'run.terminal']);
    t.false(await w.leases.cancelIfQueued(runId), 'an ended run ends once');
    t.deepEqual(await w.eventTypes(runId), ['run.cancel_requested', 'run.terminal']);
    t.false(await w.leases.cancelIfQueued(`run-${randomUUID()}`), 'no run, nothing to end');
    const intentless = `run-${randomUUID()}`;
    await w.leases.enqueueJob({ runId: intentless, projectId: 'project-c', argv: ['true'] });
    t.false(await w.leases.cancelIfQueued(intentless), 'a queued run without intent stays queued');
    t.is((await w.runStore.getRun(intentless))?.status, 'queued');
    await w.cancel(intentless);
    t.true(await w.leases.cancelIfQueued(intentless));
    const sessionId = await w.leases.registerSession('CN=worker-q');
    t.deepEqual(await w.leases.pull({ principal: 'CN=worker-q', sessionId }), { kind: 'none' });
    const { ref } = await w.assigned();
    await w.cancel(ref.runId);
    t.false(await w.leases.cancelIfQueued(ref.runId));
    t.is((await w.runStore.getRun(ref.runId))?.status, 'running');
  },
);

test.serial(
  "cluster: a restarted worker's new session re-attaches its lease (same fence); the old session is told fence; another name, a replayed session, a wrong fence are refused typed and move nothing (docs/decisions/0272)",
  async (t) => {
    const { world: w } = await ready;
    const { caller, ref } = await w.assigned();
    const restarted = { principal: caller.principal, sessionId: await w.leases.registerSession(caller.principal) };
    const stranger = { principal: 'CN=worker-x', sessionId: await w.leases.registerSession('CN=worker-x') };
    await t.throwsAsync(
      w.leases.attach(stranger, ref),
      { code: 'ERR_PIDFENCE_CLUSTER_LEASE_NOT_YOURS' },
      'a valid certificate of another name',
    );
    await t.throwsAsync(
      w.leases.attach({ principal: 'CN=worker-x', sessionId: restarted.sessionId }, ref),
      { code: 'ERR_PIDFENCE_CLUSTER_SESSION' },
      'a session replayed under another name is no session of it',
    );
    await t.throwsAsync(w.leases.attach(restarted, { ...ref, fence: ref.fence + 1 }), {
      code: 'ERR_PIDFENCE_CLUSTER_LEASE_NOT_YOURS',
    });
    t.like(await w.leases.tick(caller, ref), { kind: 'renewed' }, 'refusals moved nothing');
    t.is(await w.leases.attach(restarted, ref), 'attached');
    t.is(await w.leases.attach(restarted, ref), 'already');
    t.deepEqual(await w.leases.tick(caller, ref), { kind: 'lost', reason: 'fence' }, 'the stale session is refused');
    t.like(await w.leases.tick(restarted, ref), { kind: 'renewed' });
    t.deepEqual(await w.eventTypes(ref.runId), ['run.reattached']);
  },
);

test.serial(
  "cluster: forget ends the name's open runs `forgotten` once; a second forget changes nothing; the late tick and report are refused typed (docs/decisions/0271)",
  async (t) => {
    const { database: db, world: w } = await ready;
    const principal = `worker-forget-${randomUUID().slice(0, 8)}`;
    const sessionId = await w.leases.registerSession(principal);
    const runId = `run-${randomUUID()}`;
    await w.leases.enqueueJob({ runId, projectId: 'project-c', argv: ['sleep', '30'] });
    let ref;
    for (;;) {
      const pulled = await w.leases.pull({ principal, sessionId });
      if (pulled.kind !== 'assigned') throw new Error(`pull: ${pulled.kind}`);
      if (pulled.assignment.runId === runId) {
        ref = pulled.assignment;
        break;
      }
    }
    t.deepEqual(await w.leases.forgetWorker(principal, 'op-a'), { runsForgotten: 1, sessionsEnded: 1 });
    t.deepEqual(
      await w.leases.forgetWorker(principal, 'op-b'),
      { runsForgotten: 0, sessionsEnded: 0 },
      'the second operator finds nothing left',
    );
    t.is(await w.leases.forgetWorker('worker-never-seen', 'op-a'), null);
    t.is((await w.runStore.getRun(runId))?.status, 'failed');
    t.deepEqual(await w.leases.tick({ principal, sessionId }, ref), { kind: 'lost', reason: 'forgotten' });
    await t.throwsAsync(
      w.leases.complete(
        { principal, sessionId },
        { ...ref, status: 'succeeded', cause: 'receipt', exit: { exitCode: 0, signal: null } },
      ),
      { code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' },
    );
    t.is((await w.runStore.getRun(runId))?.status, 'failed', 'nothing rewritten');
    const audit = await db.owner.query(
      'SELECT actor, outcome FROM worker_audit WHERE worker_name = $1 ORDER BY created_at_ms, actor',
      [principal],
    );
    t.deepEqual(audit.rows, [
      { actor: 'op-a', outcome: 'changed' },
      { actor: 'op-b', outcome: 'unchanged' },
    ]);
  },
);
