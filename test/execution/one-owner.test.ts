// Issue 13 items 3-6, 8 and 9 on a real SQLite store with real jobs: launcher death is not job death
// (docs/decisions/0071), every drain has a hard bound, completions come before stops, `timed_out`
// end to end, the launcher's argv holds no command, and the admission undo.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { captureIdentity, signalVerified } from '../../lib/native/index';
import { parseHandle } from '../../lib/process/index';
import { resolveHostId, runnerGoneProof, stopOrphanedRun } from '../../lib/execution/index';
import { receiptTokenDigest, writeReceiptAtomic } from '../../lib/execution/receipts';
import type { RunnerRecord } from '../../lib/contract/index';
import { groupMembers, reapGroupAtEnd } from '../helpers/job-groups';
import { markedProcesses } from '../helpers/marked-processes';
import { spawnJob } from '../helpers/processes';
import { diskErrorWhile, openWorld, overriding, receiptExists, type World } from './world';
import { delay, until } from '../helpers/wait';
import { driverOf } from '../../lib/store/sqlite/driver';

async function admitted(
  world: World,
  args: readonly string[],
  extra: { timeoutMs?: number } = {},
): Promise<{ runId: string; attemptId: string; handle: string; pgid: number }> {
  const outcome = await world.app.admit({ projectId: 'p1', command: 'sh', args: ['-c', ...args], ...extra });
  if (outcome.kind !== 'admitted') throw new Error('not admitted');
  const handle = (await world.store.runStore.getAttempt(outcome.runId, outcome.attemptId))?.handle ?? '';
  return { runId: outcome.runId, attemptId: outcome.attemptId, handle, pgid: parseHandle(handle).pgid };
}

async function cycles(world: World, count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) await world.app.lifecycle.runCycle();
}

function killLauncherOnly(handle: string): void {
  const launcher = parseHandle(handle);
  const identity = captureIdentity(launcher.pid);
  if (identity === null || identity.startTicks !== launcher.startTicks)
    throw new Error('the launcher is not the one admitted');
  if (signalVerified(identity, 'SIGKILL', { group: false }).kind !== 'signalled')
    throw new Error('the launcher could not be killed');
}

for (const [name, script] of [
  ['children that obey TERM', 'sleep 30 & sleep 30 & wait'],
  ['a TERM-ignoring survivor', 'trap "" TERM; (trap "" TERM; sleep 30; sleep 30) & sleep 30 & wait'],
] as const) {
  test(`launcher death is not job death (${name}): SIGKILL only the launcher, the run stays non-terminal, a cancel stops every survivor`, async (t) => {
    const world = openWorld(t);
    const bystander = spawnJob(t, 'sleep', ['30']);
    const job = await admitted(world, [script]);
    reapGroupAtEnd(t, job.pgid);
    await until(() => groupMembers(job.pgid).length >= 4, { timeoutMs: 10_000, what: 'launcher, shell and children' });
    killLauncherOnly(job.handle);
    await until(() => groupMembers(job.pgid).every((member) => member.pid !== job.pgid), {
      timeoutMs: 5_000,
      what: 'the launcher gone',
    });
    await cycles(world, 3);
    const survivors = groupMembers(job.pgid).length;
    t.true(survivors >= 3, "the job's processes still run");
    t.is((await world.store.runStore.getRun(job.runId))?.status, 'running', 'no terminal state while the group lives');
    await world.store.runStore.requestCancellation({ runId: job.runId, reason: 'user', eventId: `evt-${job.runId}-c` });
    await until(
      async () =>
        (await world.store.runStore.getRun(job.runId))?.status !== 'running' ||
        (await world.app.lifecycle.runCycle(), false),
      { timeoutMs: 15_000, what: 'the run to converge' },
    );
    t.like(await world.store.runStore.getRun(job.runId), { status: 'cancelled', cancelReason: 'user' });
    t.is(groupMembers(job.pgid).length, 0, 'no survivor');
    t.is(bystander.child.exitCode, null, 'no innocent was signalled');
  });
}

test('every drain has a hard bound: 20 TERM-ignoring jobs, 5 s grace, 3 s budget → timed_out within budget + 1 s, storage closed', async (t) => {
  let closed = 0;
  const world = openWorld(t, {
    graceMs: 5_000,
    drainTimeoutMs: 3_000,
    wrap: (store) => ({
      close: () => {
        closed += 1;
        store.close();
      },
    }),
  });
  const jobs: Array<Awaited<ReturnType<typeof admitted>>> = [];
  for (let i = 0; i < 20; i += 1) jobs.push(await admitted(world, ['trap "" TERM; sleep 30']));
  for (const job of jobs) reapGroupAtEnd(t, job.pgid);
  // Every job has set its trap: a TERM before that would end it and prove nothing.
  await until(() => jobs.every((job) => groupMembers(job.pgid).length === 3), {
    timeoutMs: 30_000,
    what: 'twenty launchers, shells and sleeps',
  });
  const started = Date.now();
  const report = await world.app.drain();
  const tookMs = Date.now() - started;
  t.like(report, { kind: 'timed_out', active: 20, remaining: 20 });
  t.true(tookMs <= 4_000, `the drain returned after ${tookMs} ms`);
  t.is(closed, 1, 'storage closed');
});

test('completions before stops: a job that exited with its receipt on disk, then cancelled, ends by its receipt and is never stopped', async (t) => {
  for (const path of ['cycle', 'drain'] as const) {
    const world = openWorld(t);
    const job = await admitted(world, ['exit 4']);
    await until(() => receiptExists(world.receipts, job.attemptId), { timeoutMs: 10_000, what: 'the receipt' });
    world.app.notices.take(); // the notice is not durable: the periodic page must find the receipt
    await world.store.runStore.requestCancellation({ runId: job.runId, reason: 'user', eventId: `evt-${job.runId}-c` });
    if (path === 'cycle') await world.app.lifecycle.runCycle();
    else await world.app.drain();
    const reopened =
      path === 'drain' ? (await import('../../lib/store/sqlite/index')).openSqliteStore(world.file) : world.store;
    t.like(
      await reopened.runStore.getRun(job.runId),
      { status: 'failed' },
      `${path}: the job finished before the cancel`,
    );
    // The cancel wrote a pending record (docs/decisions/0022); a claim would have counted a dispatch.
    const dispatches = driverOf(reopened.database)
      .prepare('SELECT COUNT(*) AS n FROM cancellation_dispatches WHERE run_id = ? AND dispatch_count > 0')
      .get(job.runId) as { n: number };
    t.is(dispatches.n, 0, `${path}: no claim, so no controller call`);
    t.false((await reopened.runStore.listEvents(job.runId)).some((event) => event.type === 'run.cancel_dispatched'));
    if (reopened !== world.store) reopened.close();
  }
});

test('timed_out end to end: the drain keeps timeout and policy reasons, and a late receipt cannot overwrite timed_out', async (t) => {
  const world = openWorld(t);
  const timed = await admitted(world, ['trap "" TERM; sleep 30'], { timeoutMs: 1 });
  const policy = await admitted(world, ['sleep 30']);
  reapGroupAtEnd(t, timed.pgid);
  reapGroupAtEnd(t, policy.pgid);
  await delay(10);
  const deadlines = await world.app.lifecycle.runCycle();
  t.is(deadlines.deadlines, 1);
  await world.store.runStore.requestCancellation({
    runId: policy.runId,
    reason: 'policy',
    eventId: `evt-${policy.runId}-p`,
  });

  // A `claimed` attempt of this runner with a timeout intent, and the receipt its launcher writes late.
  const token = 'late-receipt-token-000000000000000000000000'.slice(0, 43);
  await world.store.runStore.createRun({ runId: 'run-late', projectId: 'p1' });
  await world.store.runStore.createAttempt({
    runId: 'run-late',
    attemptId: 'run-late-a1',
    receiptTokenDigest: receiptTokenDigest(token),
    runnerId: world.app.runner.runnerId,
  });
  await world.store.runStore.requestCancellation({ runId: 'run-late', reason: 'timeout', eventId: 'evt-late-timeout' });
  t.like(await world.app.processor.process({ runId: 'run-late', attemptId: 'run-late-a1' }), {
    kind: 'completed',
    status: 'timed_out',
    cause: 'never_started',
  });
  const now = Date.now();
  writeReceiptAtomic(world.receipts, {
    v: 1,
    runId: 'run-late',
    attemptId: 'run-late-a1',
    seq: 1,
    token,
    exitCode: 0,
    signal: null,
    startedAtMs: now,
    finishedAtMs: now,
    spawnFailed: false,
  });
  t.like(await world.app.processor.process({ runId: 'run-late', attemptId: 'run-late-a1' }), {
    kind: 'terminal',
    status: 'timed_out',
    lateReceipt: true,
  });
  t.is((await world.store.runStore.getRun('run-late'))?.status, 'timed_out');

  const report = await world.app.drain();
  t.is(report.kind, 'drained');
  const reopened = (await import('../../lib/store/sqlite/index')).openSqliteStore(world.file);
  t.teardown(() => reopened.close());
  t.like(await reopened.runStore.getRun(timed.runId), { status: 'timed_out', cancelReason: 'timeout' });
  t.like(await reopened.runStore.getRun(policy.runId), { status: 'cancelled', cancelReason: 'policy' });
});

test("the launcher's argv and environment hold neither the job's command nor the receipt token", async (t) => {
  const world = openWorld(t);
  const job = await admitted(world, ['sleep 30 # secret-arg-5c1']);
  reapGroupAtEnd(t, job.pgid);
  const cmdline = readFileSync(`/proc/${job.pgid}/cmdline`, 'utf8');
  const environ = readFileSync(`/proc/${job.pgid}/environ`, 'utf8');
  t.regex(cmdline, /pidfence-launcher/);
  t.false(cmdline.includes('secret-arg-5c1') || cmdline.includes('sleep'), "no command in the launcher's argv");
  t.false(/PIDFENCE_RECEIPT_TOKEN/.test(environ), 'no token in its environment');
  await until(() => groupMembers(job.pgid).length === 3, { timeoutMs: 10_000, what: 'launcher, shell, sleep' });
});

test('admission undo: a handle the store could not keep leaves no process and no intent; a kept handle runs', async (t) => {
  let failHandle = true;
  const world = openWorld(t, {
    wrap: (store) => ({
      runStore: diskErrorWhile(
        store.runStore,
        'advanceAttempt',
        (command: { to: string }) => failHandle && command.to === 'running',
      ),
    }),
  });
  const mark = `undo-${process.pid}-${Date.now()}`;
  await t.throwsAsync(
    world.app.admit({
      projectId: 'p1',
      runId: 'run-undo',
      command: 'sleep',
      args: ['30'],
      env: { ...process.env, PIDFENCE_TEST_MARK: mark },
    }),
    { message: /disk I\/O error/ },
  );
  const attempt = await world.store.runStore.getAttempt('run-undo', 'run-undo-a1');
  t.like(attempt, { status: 'starting', handle: null });
  t.like(await world.store.runStore.getRun('run-undo'), { cancelRequestedAtMs: null, cancelReason: null });
  t.deepEqual(await world.store.runStore.listEvents('run-undo'), []);
  t.is(markedProcesses(mark).length, 0, 'the launched launcher and job are gone before the error reached the caller');
  failHandle = false;
  const kept = await admitted(world, ['sleep 30']);
  reapGroupAtEnd(t, kept.pgid);
  t.like(await world.store.runStore.getAttempt(kept.runId, kept.attemptId), { status: 'running' });
  t.true(groupMembers(kept.pgid).length >= 1);
});

test('a runner is proved gone only by a clean end, its exit, a reused PID or another boot, and only on its own host', async (t) => {
  const self = { runnerId: 'rnr-self', hostId: 'host-a', kind: 'supervise' as const };
  const live = captureIdentity(process.pid);
  const child = spawnJob(t, 'sleep', ['30']);
  if (live === null) throw new Error('no identity');
  const record = (identity: object, extra: Partial<RunnerRecord> = {}): RunnerRecord => ({
    runnerId: 'rnr-other',
    hostId: 'host-a',
    kind: 'run',
    identity: JSON.stringify(identity),
    startedAtMs: 0,
    endedAtMs: null,
    ...extra,
  });
  const { pgid: _pgid, ...liveIdentity } = live;
  t.is(runnerGoneProof(record(liveIdentity), self), null, 'alive');
  t.is(
    runnerGoneProof(record(liveIdentity, { hostId: 'host-b', endedAtMs: 1 }), self),
    null,
    'another host, even ended',
  );
  t.is(runnerGoneProof(record(liveIdentity, { endedAtMs: 1 }), self), 'ended');
  t.is(runnerGoneProof(record({ ...liveIdentity, bootId: '00000000-0000-4000-8000-000000000000' }), self), 'rebooted');
  const { pidfsIno: _ino, ...inodeLess } = liveIdentity;
  t.is(runnerGoneProof(record(inodeLess), self), null, 'an identity without its inode proves nothing');
  if (liveIdentity.pidfsIno !== undefined) {
    t.is(
      runnerGoneProof(record({ ...liveIdentity, pidfsIno: String(BigInt(liveIdentity.pidfsIno) + 1n) }), self),
      'pid_reused',
      'another process at that PID',
    );
  }
  const { pgid: _childPgid, ...childIdentity } = child.identity;
  await child.stop();
  t.is(runnerGoneProof(record(childIdentity), self), 'exited');
  t.is(runnerGoneProof(record(childIdentity, { runnerId: 'rnr-self' }), self), null, 'never itself');
});

test('the host id: the machine id never as it is, PIDFENCE_HOST_ID when set, else one id created once in the state directory', (t) => {
  const state = mkdtempSync(path.join(tmpdir(), 'pidfence-host-'));
  t.teardown(() => rmSync(state, { recursive: true, force: true }));
  const fromMachine = resolveHostId({});
  t.regex(fromMachine, /^h-[0-9a-f]{32}$/);
  t.false(fromMachine.includes(readFileSync('/etc/machine-id', 'utf8').trim()), 'never the machine id itself');
  t.is(resolveHostId({ PIDFENCE_HOST_ID: 'rack-7.node-3' }), 'rack-7.node-3');
  t.throws(() => resolveHostId({ PIDFENCE_HOST_ID: 'two words' }), { code: 'ERR_PIDFENCE_INVALID_HOST_ID' } as never);
  // No machine id (a container image): one random id, created once and then read back.
  const first = resolveHostId({ XDG_STATE_HOME: state }, []);
  t.regex(first, /^h-[0-9a-f]{32}$/);
  t.not(first, fromMachine);
  t.is(resolveHostId({ XDG_STATE_HOME: state }, []), first, 'stable across runs');
  t.is(statSync(path.join(state, 'pidfence', 'host-id')).mode & 0o777, 0o600);
});

test('a cancel that loses the takeover of an orphan to another runner does not claim to have stopped it', async (t) => {
  const world = openWorld(t);
  const other = openWorld(t, { at: { dir: world.dir, file: world.file, receipts: world.receipts } });
  const winner = await world.app.open();
  const loser = await other.app.open();
  const gone = spawnJob(t, 'sleep', ['30']);
  const { pgid: _pgid, ...goneIdentity } = gone.identity;
  await gone.stop();
  await world.store.runnerStore.registerRunner({
    runnerId: 'rnr-gone',
    hostId: winner.hostId,
    kind: 'run',
    identity: JSON.stringify(goneIdentity),
  });
  await world.store.runStore.createRun({ runId: 'run-orphan', projectId: 'p1' });
  await world.store.runStore.createAttempt({ runId: 'run-orphan', attemptId: 'run-orphan-a1', runnerId: 'rnr-gone' });
  await world.store.runStore.requestCancellation({ runId: 'run-orphan', reason: 'user', eventId: 'evt-orphan' });
  // The winner takes the orphan over between the loser's look at its owner and the loser's takeover.
  const racedStore = overriding(other.store.runnerStore, {
    activeAttemptOwner: async (runId: string) => {
      const owner = await other.store.runnerStore.activeAttemptOwner(runId);
      await world.store.runnerStore.adoptAttempts({
        fromRunnerId: 'rnr-gone',
        toRunnerId: winner.runnerId,
        proof: 'exited',
        runId,
      });
      return owner;
    },
  });
  const outcome = await stopOrphanedRun({
    runnerStore: racedStore,
    runner: loser,
    runId: 'run-orphan',
    lifecycle: other.app.lifecycle,
    processor: other.app.processor,
    boundMs: 1_000,
    watch: () => undefined,
    onCompleted: () => undefined,
  });
  t.deepEqual(outcome, { kind: 'owner_alive' });
  t.like(
    await world.store.runStore.getAttempt('run-orphan', 'run-orphan-a1'),
    { status: 'claimed' },
    'the loser ended nothing',
  );
});
