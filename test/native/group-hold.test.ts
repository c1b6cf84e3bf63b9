// acquireGroupHold: a verified pidfd held open signals the leader's group, also after the leader
// exited and was reaped, and answers already_exited once the group is empty.
import test from 'ava';

import { captureIdentity, acquireGroupHold, signalVerified, waitExit } from '../../lib/native/index';
import { receivedSignals, spawnJob, spawnRecorder } from '../helpers/processes';
import { delay } from '../helpers/wait';

test('a held group is signalled through its pidfd after the leader was reaped', async (t) => {
  // The leader is `sleep` (exec'd by sh); the member ignores nothing and logs USR1.
  const job = spawnJob(t, 'sh', [
    '-c',
    `sh -c 'trap "echo member-USR1" USR1; echo "member $$"; while :; do sleep 0.05; done' & exec sleep 3600`,
  ]);
  const memberPid = Number((await job.waitForLine(/^member /)).split(' ')[1]);
  const member = captureIdentity(memberPid)!;
  t.teardown(() => void signalVerified(member, 'SIGKILL'));
  const held = acquireGroupHold(job.identity);
  if (held.kind !== 'held') return t.fail(JSON.stringify(held));
  t.teardown(() => held.hold.release());

  t.is(signalVerified(job.identity, 'SIGKILL').kind, 'signalled'); // the leader only
  await held.hold.exited;
  await job.exited; // reaped by Node: its PID is free for reuse now
  t.deepEqual(held.hold.signalGroup('SIGUSR1'), { kind: 'signalled', mode: 'pidfd-process-group' });
  await job.waitForLine(/^member-USR1$/);
  t.deepEqual(held.hold.signalGroup('SIGKILL'), { kind: 'signalled', mode: 'pidfd-process-group' });
  t.regex((await waitExit(member, 2000)).kind, /^(exited|already_exited)$/);
  // The member's last `sleep 0.05` and its reaping by init trail the KILL briefly.
  let probe = held.hold.signalGroup(0);
  for (let i = 0; i < 100 && probe.kind !== 'already_exited'; i++) {
    await delay(20);
    probe = held.hold.signalGroup(0);
  }
  t.deepEqual(probe, { kind: 'already_exited' }, 'an empty group answers already_exited');
});

test('a hold refuses to be used after release, and acquiring it proves identity first', async (t) => {
  const job = await spawnRecorder(t);
  const wrong = acquireGroupHold({ ...job.identity, pidfsIno: '1' });
  t.deepEqual(wrong, { kind: 'identity_mismatch', reason: 'pidfs_ino' });
  const held = acquireGroupHold(job.identity);
  if (held.kind !== 'held') return t.fail(JSON.stringify(held));
  held.hold.release();
  t.throws(() => held.hold.signalGroup('SIGUSR1'), { code: 'ERR_PIDFENCE_HOLD_RELEASED' });
  await delay(300);
  t.deepEqual(receivedSignals(job), []);
});

test('gate 8: a process that does not lead its group gets no hold: identity_mismatch (not_group_leader)', async (t) => {
  const job = await spawnRecorder(t);
  const member = captureIdentity(job.memberPid);
  if (member === null) return t.fail('the member exited');
  t.not(member.pgid, member.pid, "the member is in the leader's group, not its own");
  // With pgid the identity itself says so; without it only the kernel-side check can tell.
  const { pgid: _pgid, ...withoutPgid } = member;
  for (const expected of [member, withoutPgid]) {
    t.deepEqual(acquireGroupHold(expected), { kind: 'identity_mismatch', reason: 'not_group_leader' });
  }
  await delay(300);
  t.deepEqual(receivedSignals(job), []);
});
