// LocalProcessController.requestTermination with real process groups. The recorder fixture traps
// TERM (and logs it), so it only dies by KILL; `sleep` obeys TERM.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

import test from 'ava';

import { captureIdentity, signalVerified, waitExit } from '../../lib/native/index';
import { LocalProcessController, formatHandle, handleFromIdentity, spawnGroupLeader } from '../../lib/process/index';
import { receivedSignals, spawnJob, spawnRecorder } from '../helpers/processes';
import { delay } from '../helpers/wait';

const controller = new LocalProcessController();
const SETTLE_MS = 400;

function handleOf(identity: Parameters<typeof handleFromIdentity>[0]): string {
  return formatHandle(handleFromIdentity(identity));
}

test('a TERM-ignoring group is KILLed after the grace period', async (t) => {
  const job = await spawnRecorder(t);
  const member = captureIdentity(job.memberPid)!;
  const started = Date.now();
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 300,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: true, exitObserved: true });
  t.true(Date.now() - started >= 300, 'KILL only after the grace period');
  t.deepEqual(await job.exited, { code: null, signal: 'SIGKILL' });
  t.true(job.lines.includes('leader-TERM'), 'TERM came first');
  // The member got the same KILL; its exit may trail the leader's by a scheduling slice.
  t.regex((await waitExit(member, 2000)).kind, /^(exited|already_exited)$/, 'the group member died too');
});

test('a TERM-obeying child exits on TERM and never sees KILL', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 5000,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: false, exitObserved: true });
  t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
});

test('grandchildren in the group die with the leader', async (t) => {
  const job = spawnJob(t, 'sh', ['-c', 'sleep 3600 & a=$!; sleep 3600 & b=$!; echo "kids $a $b"; wait']);
  const kids = (await job.waitForLine(/^kids /)).split(' ').slice(1).map(Number);
  const identities = kids.map((pid) => captureIdentity(pid)!);
  t.is(identities.length, 2);
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 2000,
  });
  t.is(result.result, 'termination_requested');
  for (const kid of identities) t.regex((await waitExit(kid, 2000)).kind, /^(exited|already_exited)$/);
});

test('group members that outlive a TERM-obeying leader are KILLed when the grace period ends', async (t) => {
  // The member ignores TERM (inherited by its sleeps); the leader (exec'd sleep) obeys it.
  const job = spawnJob(t, 'sh', [
    '-c',
    `sh -c 'trap "" TERM; echo "member $$"; while :; do sleep 0.05; done' & exec sleep 3600`,
  ]);
  const member = captureIdentity(Number((await job.waitForLine(/^member /)).split(' ')[1]))!;
  t.teardown(() => void signalVerified(member, 'SIGKILL'));
  const started = Date.now();
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 400,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: true, exitObserved: true });
  t.true(Date.now() - started >= 400, 'members get the whole grace period');
  t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' }, 'the leader itself obeyed TERM');
  t.regex((await waitExit(member, 2000)).kind, /^(exited|already_exited)$/, 'the member was swept');
});

test('a child that escaped into its own session is out of reach (docs/decisions/0005)', async (t) => {
  const job = spawnJob(t, 'sh', ['-c', 'setsid sleep 3600 & echo "escaped $!"; exec sleep 3600']);
  const escapedPid = Number((await job.waitForLine(/^escaped /)).split(' ')[1]);
  let escaped = captureIdentity(escapedPid);
  for (let i = 0; i < 100 && escaped?.pgid !== escapedPid; i++) {
    await delay(10); // setsid(1) runs setsid() right after the fork
    escaped = captureIdentity(escapedPid);
  }
  t.is(escaped?.pgid, escapedPid, 'the escaped child leads its own group');
  t.teardown(() => void signalVerified(escaped!, 'SIGKILL', { group: true }));
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 2000,
  });
  t.is(result.result, 'termination_requested');
  t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
  t.is(
    signalVerified(escaped!, 0, { group: true }).kind,
    'signalled',
    'pinned: a process that left the group is not stopped',
  );
});

test('a stopped (SIGSTOP) group still terminates', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  t.is(signalVerified(job.identity, 'SIGSTOP', { group: true }).kind, 'signalled');
  const result = await controller.requestTermination({
    attemptPid: job.identity.pid,
    handle: handleOf(job.identity),
    graceMs: 3000,
  });
  t.deepEqual(result, { result: 'termination_requested', escalated: false, exitObserved: true });
  t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
});

test('an exited process → already_exited, no signal', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const handle = handleOf(job.identity);
  await job.stop();
  t.deepEqual(await controller.requestTermination({ attemptPid: job.identity.pid, handle, graceMs: 100 }), {
    result: 'already_exited',
    escalated: false,
    exitObserved: true,
  });
});

// design/dispatch §6 gate 8: identity / PID / process-group mismatch → zero signals.
const gate8: Array<
  [
    string,
    (
      identity: ReturnType<typeof captureIdentity> & object,
      memberPid: number,
    ) => { attemptPid: number; handle: string },
    string,
  ]
> = [
  [
    'wrong start ticks',
    (id) => {
      const { pidfsIno: _ino, ...viaProc } = id;
      return { attemptPid: id.pid, handle: handleOf({ ...viaProc, startTicks: String(BigInt(id.startTicks) + 1n) }) };
    },
    'identity_mismatch',
  ],
  [
    'wrong pidfs inode',
    (id) => ({ attemptPid: id.pid, handle: handleOf({ ...id, pidfsIno: String(BigInt(id.pidfsIno!) + 1n) }) }),
    'identity_mismatch',
  ],
  [
    'a handle from another boot',
    (id) => ({ attemptPid: id.pid, handle: handleOf({ ...id, bootId: '00000000-0000-4000-8000-000000000000' }) }),
    'identity_mismatch',
  ],
  [
    'the Attempt PID differs from the handle PID',
    (id) => ({ attemptPid: id.pid + 1, handle: handleOf(id) }),
    'pid_mismatch',
  ],
  [
    'a process that does not lead its group',
    (id, memberPid) => {
      const member = captureIdentity(memberPid)!;
      // A forged handle claiming the member leads a group: the kernel-side check refuses it.
      return { attemptPid: memberPid, handle: handleOf({ ...member, pgid: memberPid }) };
    },
    'identity_mismatch',
  ],
];

for (const [what, forge, expected] of gate8) {
  test(`gate 8: ${what} → ${expected} and zero signals`, async (t) => {
    const job = await spawnRecorder(t);
    const request = forge(job.identity, job.memberPid);
    const result = await controller.requestTermination({ ...request, graceMs: 100 });
    t.deepEqual(result, { result: expected as 'identity_mismatch', escalated: false, exitObserved: false });
    await delay(SETTLE_MS);
    t.deepEqual(receivedSignals(job), [], 'neither the leader nor the member received anything');
    t.is(signalVerified(job.identity, 0, { group: true }).kind, 'signalled', 'the job still runs');
  });
}

const malformedHandles: Array<[string, unknown]> = [
  ['not a string', 7],
  ['not JSON', 'pid=42'],
  [
    'an unknown key',
    '{"v":1,"platform":"linux","bootId":"c9b1fe21-2cf3-46b0-af2b-691bcc829792","pid":42,"startTicks":"1","pgid":42,"cmd":"x"}',
  ],
  [
    'pgid different from pid',
    '{"v":1,"platform":"linux","bootId":"c9b1fe21-2cf3-46b0-af2b-691bcc829792","pid":42,"startTicks":"1","pgid":43}',
  ],
  [
    'an unknown version',
    '{"v":9,"platform":"linux","bootId":"c9b1fe21-2cf3-46b0-af2b-691bcc829792","pid":42,"startTicks":"1","pgid":42}',
  ],
  ['over the size cap', 'x'.repeat(10_000)],
];

for (const [what, handle] of malformedHandles) {
  test(`a malformed handle (${what}) → invalid`, async (t) => {
    const result = await controller.requestTermination({ attemptPid: 42, handle: handle as string, graceMs: 100 });
    t.deepEqual(result, { result: 'invalid', escalated: false, exitObserved: false });
  });
}

test('a malformed attempt PID → invalid; a bad grace is a typed error', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const handle = handleOf(job.identity);
  t.is((await controller.requestTermination({ attemptPid: -1, handle, graceMs: 100 })).result, 'invalid');
  await t.throwsAsync(controller.requestTermination({ attemptPid: job.identity.pid, handle, graceMs: 30_001 }), {
    code: 'ERR_PIDFENCE_INVALID_GRACE',
  });
  await t.throwsAsync(controller.requestTermination({ attemptPid: job.identity.pid, handle, graceMs: 1.5 }), {
    code: 'ERR_PIDFENCE_INVALID_GRACE',
  });
  t.is(signalVerified(job.identity, 0).kind, 'signalled');
});

test('the call is bounded and exposes its bound', (t) => {
  t.is(LocalProcessController.boundMs(1000), 1000 + 2000 + 500);
  t.is(LocalProcessController.maxBoundMs, 32_500);
  t.throws(() => LocalProcessController.boundMs(-1), { code: 'ERR_PIDFENCE_INVALID_GRACE' });
});

test('without the addon every request answers unsupported and the job is untouched', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const entry = path.resolve(__dirname, '..', '..', 'lib', 'process', 'index.js');
  const script = `
    const { LocalProcessController } = require(${JSON.stringify(entry)});
    new LocalProcessController().requestTermination(${JSON.stringify({ attemptPid: job.identity.pid, handle: handleOf(job.identity), graceMs: 100 })})
      .then((r) => process.stdout.write(JSON.stringify(r)));
  `;
  const run = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, PIDFENCE_NO_ADDON: '1' },
    encoding: 'utf8',
  });
  t.is(run.status, 0, run.stderr);
  t.deepEqual(JSON.parse(run.stdout), { result: 'unsupported', escalated: false, exitObserved: false });
  t.is(signalVerified(job.identity, 0).kind, 'signalled');
});

test('results carry no PID, command or handle text', async (t) => {
  const job = spawnGroupLeader('sleep', ['3600'], { stdio: 'ignore' });
  const result = await controller.requestTermination({
    attemptPid: job.child.pid!,
    handle: job.handle!,
    graceMs: 1000,
  });
  const text = JSON.stringify(result);
  t.false(text.includes(String(job.child.pid)));
  t.false(text.includes('sleep'));
  t.false(text.includes(job.handle!));
  t.deepEqual(Object.keys(result).sort(), ['escalated', 'exitObserved', 'result']);
  await job.exit;
});
