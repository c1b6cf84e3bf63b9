// The controller on a kernel without PIDFD_SIGNAL_PROCESS_GROUP (forced here: this file runs in
// its own process with PIDFENCE_FORCE_GROUP_FALLBACK=1): group signals go the
// pgid-after-pidfd-check way, and only the leader's exit can be waited for.
process.env.PIDFENCE_FORCE_GROUP_FALLBACK = '1';

import test from 'ava';

import { capabilities, captureIdentity, acquireGroupHold, signalVerified, waitExit } from '../../lib/native/index';
import { LocalProcessController, formatHandle, handleFromIdentity } from '../../lib/process/index';
import { spawnJob, spawnRecorder } from '../helpers/processes';

const controller = new LocalProcessController();

test('the forced fallback is what capabilities report, and no group hold is offered', (t) => {
  t.is(capabilities().groupSignalMode, 'pgid-after-pidfd-check');
  const job = spawnJob(t, 'sleep', ['3600']);
  t.is(acquireGroupHold(job.identity).kind, 'unsupported');
});

test('without the group flag a TERM-ignoring group is still KILLed after the grace period', async (t) => {
  const job = await spawnRecorder(t);
  const member = captureIdentity(job.memberPid)!;
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: formatHandle(handleFromIdentity(job.identity)),
    graceMs: 300,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: true, exitObserved: true });
  t.deepEqual(await job.exited, { code: null, signal: 'SIGKILL' });
  t.regex((await waitExit(member, 2000)).kind, /^(exited|already_exited)$/);
});

test('without the group flag a TERM-obeying job ends on TERM', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: formatHandle(handleFromIdentity(job.identity)),
    graceMs: 3000,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: false, exitObserved: true });
  t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
  t.is(signalVerified(job.identity, 0).kind, 'already_exited');
});
