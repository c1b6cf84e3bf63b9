// Runner crash and restart (design/execution §1, issue 07 item 6), and a job that ignores TERM on timeout.
import path from 'node:path';

import test from 'ava';

import { signalVerified, waitExit } from '../../lib/native/index';
import { formatHandle, handleFromIdentity } from '../../lib/process/index';
import { spawnJob } from '../helpers/processes';
import { handleAlive, openWorld, receiptExists, worldDirectory } from './world';
import { until } from '../helpers/wait';

test('runner crash: a restarted runner finds finished jobs by their receipts and running ones by their handles, and signals nothing it cannot prove', async (t) => {
  const at = worldDirectory(t);
  const runner = spawnJob(t, process.execPath, [
    path.join(__dirname, 'runner-child.js'),
    at.dir,
    'sleep 0.5; exit 3',
    'exec sleep 30',
  ]);
  await runner.waitForLine(/^runner-ready$/, 15_000);
  const [short, long] = runner.lines.filter((line) => line.startsWith('admitted ')).map((line) => line.split(' '));
  const [, shortRun = '', shortAttempt = ''] = short ?? [];
  const [, longRun = '', longAttempt = ''] = long ?? [];
  t.is(short?.[3], 'running');

  // SIGKILL the runner through its proved identity (never a bare PID); its launchers live on.
  t.is(signalVerified(runner.identity, 'SIGKILL', { group: true }).kind, 'signalled');
  await waitExit(runner.identity, 5_000);
  await runner.exited;
  await until(() => receiptExists(at.receipts, shortAttempt), { timeoutMs: 10_000, what: "the short job's receipt" });

  const world = openWorld(t, { at });
  // An attempt whose handle names a live process under another identity: nothing may touch it.
  const bystander = spawnJob(t, 'sleep', ['30']);
  const real = handleFromIdentity(bystander.identity);
  const forged = formatHandle(
    real.pidfsIno === undefined
      ? { ...real, startTicks: String(BigInt(real.startTicks) + 1n) }
      : { ...real, pidfsIno: String(BigInt(real.pidfsIno) + 1n) },
  );
  const self = await world.app.open();
  await world.store.runStore.createRun({ runId: 'run-unproven', projectId: 'p1' });
  await world.store.runStore.createAttempt({
    runId: 'run-unproven',
    attemptId: 'run-unproven-a1',
    runnerId: self.runnerId,
  });
  await world.store.runStore.advanceAttempt({
    runId: 'run-unproven',
    attemptId: 'run-unproven-a1',
    from: 'claimed',
    to: 'running',
    pid: bystander.identity.pid,
    handle: forged,
  });

  // The crashed runner is proved gone (its process exited): recovery takes its jobs over first.
  const report = await world.app.recover();
  t.like(report, { completed: 1, running: 1, unproven: 1, quarantined: 0 });
  t.like((await world.store.executionStore.listAttemptEvents(longRun, longAttempt))[0], {
    type: 'attempt.adopted',
    payload: { runner: 'exited' },
  });
  t.like(await world.store.runStore.getRun(shortRun), { status: 'failed' });
  const events = await world.store.executionStore.listAttemptEvents(shortRun, shortAttempt);
  t.deepEqual(
    events.map((e) => e.type),
    ['attempt.adopted', 'attempt.terminal'],
  );
  t.like(events[1]?.payload, { cause: 'receipt', exitCode: 3 });
  const longHandle = (await world.store.runStore.getAttempt(longRun, longAttempt))?.handle ?? '';
  t.true(handleAlive(longHandle), 'the running job was left running');
  t.is(bystander.child.exitCode, null);
  t.is((await world.store.runStore.getRun('run-unproven'))?.status, 'running');

  // The recovered job is still controllable: a user cancel stops it through the dispatch path.
  await world.store.runStore.requestCancellation({ runId: longRun, reason: 'user', eventId: 'evt-cancel-long' });
  await world.store.runStore.requestCancellation({
    runId: 'run-unproven',
    reason: 'user',
    eventId: 'evt-cancel-unproven',
  });
  await world.app.lifecycle.runCycle();
  await until(
    async () =>
      (await world.store.runStore.getRun(longRun))?.status !== 'running' ||
      (await world.app.lifecycle.runCycle(), false),
    { timeoutMs: 10_000, what: 'the long job to converge' },
  );
  t.like(await world.store.runStore.getRun(longRun), { status: 'cancelled', cancelReason: 'user' });
  t.false(handleAlive(longHandle));
  t.is(bystander.child.exitCode, null, 'the unprovable process was never signalled');
  t.is((await world.store.runStore.getRun('run-unproven'))?.status, 'running');
});

test('a job that ignores TERM is killed after the grace period on timeout and ends timed_out', async (t) => {
  const world = openWorld(t);
  const admitted = await world.app.admit({
    projectId: 'p1',
    command: 'sh',
    args: ['-c', 'trap "" TERM; sleep 30; sleep 30'],
    timeoutMs: 1,
  });
  if (admitted.kind !== 'admitted') throw new Error('not admitted');
  const handle = (await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId))?.handle ?? '';
  world.app.start();
  const outcome = await world.completed(admitted.runId);
  // In a cgroup (docs/decisions/0180) the launcher stands outside the job's tree: cgroup.kill ends the
  // job, the launcher lives to write the receipt, and that receipt is the end's proof. In group
  // containment the KILL reaches the launcher too: the stop is the proof and no receipt is left.
  const contained = handle.includes('"cgroupId"');
  t.like(outcome, { kind: 'completed', status: 'timed_out', cause: contained ? 'receipt' : 'stopped' });
  t.false(handleAlive(handle));
  if (!contained)
    t.false(receiptExists(world.receipts, admitted.attemptId), 'KILL reached the launcher too: no receipt');
  const events = (await world.store.runStore.listEvents(admitted.runId)).map((e) => e.type);
  t.deepEqual(events, ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal']);
  t.like(await world.store.runStore.getRun(admitted.runId), { cancelReason: 'timeout' });
});
