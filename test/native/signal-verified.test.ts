// signalVerified: proof and signal through one pidfd. A mismatch of any identity fact means
// zero signals delivered: the recorder fixture writes down everything it receives.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import test from 'ava';

import {
  capabilities,
  captureIdentity,
  readProcessStat,
  signalVerified,
  waitExit,
  type SignalOutcome,
} from '../../lib/native/index';
import { receivedSignals, spawnJob, spawnRecorder } from '../helpers/processes';
import { delay } from '../helpers/wait';

// Long enough for the recorder's 50 ms sleep loop to run its traps several times over.
const SETTLE_MS = 400;

// On a kernel with pidfs, a handle of this boot without its inode is refused before anything
// else is looked at (docs/decisions/0006); elsewhere the start-ticks proof answers.
const inodeLessRefused = capabilities().pidfsIdentity;
const inodeLessReason = (otherwise: string) => (inodeLessRefused ? 'pidfs_ino' : otherwise);
const inodeLessOutcome = (otherwise: SignalOutcome): SignalOutcome =>
  inodeLessRefused ? { kind: 'identity_mismatch', reason: 'pidfs_ino' } : otherwise;

test('a correct identity is signalled, and every member of its group receives the signal', async (t) => {
  const job = await spawnRecorder(t);
  const outcome = signalVerified(job.identity, 'SIGUSR1', { group: true });
  t.deepEqual(outcome, { kind: 'signalled', mode: 'pidfd-process-group' });
  await job.waitForLine(/^leader-USR1$/);
  await job.waitForLine(/^member-USR1$/);
  t.pass();
});

test('without group, only the proved process itself is signalled', async (t) => {
  const job = await spawnRecorder(t);
  t.deepEqual(signalVerified(job.identity, 'SIGUSR2'), { kind: 'signalled', mode: 'pidfd' });
  await job.waitForLine(/^leader-USR2$/);
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), ['leader-USR2']);
});

test('the forced pgid-after-pidfd-check fallback reaches the whole group and says so', async (t) => {
  const job = await spawnRecorder(t);
  const outcome = signalVerified(job.identity, 'SIGHUP', { group: true, forceGroupFallback: true });
  t.deepEqual(outcome, { kind: 'signalled', mode: 'pgid-after-pidfd-check' });
  await job.waitForLine(/^leader-HUP$/);
  await job.waitForLine(/^member-HUP$/);
  t.pass();
});

test('signal 0 is a pure proof: signalled, nothing delivered', async (t) => {
  const job = await spawnRecorder(t);
  t.deepEqual(signalVerified(job.identity, 0, { group: true }), { kind: 'signalled', mode: 'pidfd-process-group' });
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), []);
});

const mismatches = [
  // Without the inode; on a pidfs kernel that alone refuses it (see the test below).
  {
    name: 'wrong start ticks',
    reason: capabilities().pidfsIdentity ? 'pidfs_ino' : 'start_ticks',
    change: (id: { startTicks: string }) => ({ startTicks: String(BigInt(id.startTicks) + 1n) }),
    dropIno: true,
  },
  {
    name: 'wrong boot id',
    reason: 'boot_id',
    change: () => ({ bootId: '00000000-0000-4000-8000-000000000000' }),
    dropIno: false,
  },
  {
    name: 'wrong pidfs inode',
    reason: 'pidfs_ino',
    change: (id: { pidfsIno?: string }) => ({ pidfsIno: String(BigInt(id.pidfsIno ?? '1') + 1n) }),
    dropIno: false,
  },
] as const;

for (const mismatch of mismatches) {
  test(`${mismatch.name} → identity_mismatch and zero signals received`, async (t) => {
    const job = await spawnRecorder(t);
    const { pidfsIno, ...withoutIno } = job.identity;
    const base = mismatch.dropIno ? withoutIno : { ...withoutIno, ...(pidfsIno === undefined ? {} : { pidfsIno }) };
    const expected = { ...base, ...mismatch.change(job.identity) };
    for (const signal of ['SIGUSR1', 'SIGTERM', 'SIGKILL'] as const) {
      t.deepEqual(signalVerified(expected, signal, { group: true }), {
        kind: 'identity_mismatch',
        reason: mismatch.reason,
      });
    }
    await delay(SETTLE_MS);
    t.deepEqual(receivedSignals(job), []);
    t.deepEqual(
      signalVerified(job.identity, 0, { group: true }).kind,
      'signalled',
      'the job is alive: the refusal was not an exit',
    );
  });
}

test('gate 8: on a pidfs kernel, a handle of this boot without its inode → identity_mismatch and zero signals; with the inode it is signalled', async (t) => {
  if (!inodeLessRefused) return t.pass('this kernel has no pidfs: the start-ticks proof is the strongest there is');
  const job = await spawnRecorder(t);
  const { pidfsIno: _ino, ...withoutIno } = job.identity;
  for (const signal of ['SIGUSR1', 'SIGTERM', 'SIGKILL'] as const) {
    t.deepEqual(signalVerified(withoutIno, signal, { group: true }), {
      kind: 'identity_mismatch',
      reason: 'pidfs_ino',
    });
    t.deepEqual(signalVerified(withoutIno, signal), { kind: 'identity_mismatch', reason: 'pidfs_ino' });
  }
  t.deepEqual(await waitExit(withoutIno, 5000), { kind: 'identity_mismatch', reason: 'pidfs_ino' });
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), []);
  t.deepEqual(signalVerified(job.identity, 'SIGUSR1', { group: true }), {
    kind: 'signalled',
    mode: 'pidfd-process-group',
  });
  await job.waitForLine(/^leader-USR1$/);
  await job.waitForLine(/^member-USR1$/);
});

test('a non-leader with group: true → identity_mismatch (not_group_leader) and zero signals', async (t) => {
  const job = await spawnRecorder(t);
  // The member's identity is real, but it does not lead a group: a group signal through it
  // would reach a group that was never proved.
  const member = captureIdentity(job.memberPid);
  t.truthy(member);
  const { pgid, pidfsIno, ...viaProc } = member!;
  t.is(pgid, job.identity.pid);
  const viaInode = { ...viaProc, pidfsIno: pidfsIno! };
  t.deepEqual(signalVerified(member!, 'SIGUSR1', { group: true }), {
    kind: 'identity_mismatch',
    reason: 'not_group_leader',
  });
  t.deepEqual(signalVerified(viaInode, 'SIGUSR1', { group: true }), {
    kind: 'identity_mismatch',
    reason: 'not_group_leader',
  });
  t.deepEqual(signalVerified(viaProc, 'SIGUSR1', { group: true }), {
    kind: 'identity_mismatch',
    reason: inodeLessReason('not_group_leader'),
  });
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), []);
});

test('a zombie (exited, not yet reaped) → already_exited', async (t) => {
  // sh forks a child that exits once told to, then execs a long sleep that never waits for
  // it: the child stays a zombie until the sleep ends.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-zombie-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const go = path.join(dir, 'go');
  const job = spawnJob(t, 'sh', [
    '-c',
    `sh -c 'while [ ! -e "$1" ]; do sleep 0.02; done' _ ${go} & echo "zombie $!"; exec sleep 3600`,
  ]);
  const zombiePid = Number((await job.waitForLine(/^zombie /)).split(' ')[1]);
  const zombie = captureIdentity(zombiePid);
  t.truthy(zombie, 'captured while it still ran');
  fs.writeFileSync(go, '');
  for (let i = 0; i < 500 && readProcessStat(zombiePid)?.state !== 'Z'; i++) await delay(10);
  t.is(readProcessStat(zombiePid)?.state, 'Z');
  t.deepEqual(signalVerified(zombie!, 'SIGTERM'), { kind: 'already_exited' });
  const { pidfsIno: _ino, ...viaProc } = zombie!;
  t.deepEqual(signalVerified(viaProc, 'SIGTERM'), inodeLessOutcome({ kind: 'already_exited' }));
  t.deepEqual(await waitExit(zombie!, 1000), { kind: 'already_exited' });
});

test('a reaped process → already_exited', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  t.is(signalVerified(job.identity, 'SIGKILL', { group: true }).kind, 'signalled');
  await job.exited; // Node has reaped it
  t.deepEqual(signalVerified(job.identity, 'SIGTERM', { group: true }), { kind: 'already_exited' });
  const { pidfsIno: _ino, ...viaProc } = job.identity;
  t.deepEqual(signalVerified(viaProc, 'SIGTERM', { group: true }), inodeLessOutcome({ kind: 'already_exited' }));
});

test('a stopped group receives SIGCONT and the recorder resumes', async (t) => {
  const job = await spawnRecorder(t);
  t.is(signalVerified(job.identity, 'SIGSTOP', { group: true }).kind, 'signalled');
  t.is(signalVerified(job.identity, 'SIGUSR1', { group: true }).kind, 'signalled');
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), [], 'a stopped group runs no trap');
  t.is(signalVerified(job.identity, 'SIGCONT', { group: true }).kind, 'signalled');
  await job.waitForLine(/^leader-USR1$/);
  t.pass();
});

test('an unprivileged caller gets error EPERM, and nothing is delivered', async (t) => {
  const job = await spawnRecorder(t);
  const { spawnSync } = await import('node:child_process');
  const script = `
    const { signalVerified } = require(${JSON.stringify(path.resolve(__dirname, '..', '..', 'lib', 'native', 'index.js'))});
    process.stdout.write(JSON.stringify(signalVerified(${JSON.stringify(job.identity)}, 'SIGUSR1', { group: true })));
  `;
  const result = spawnSync(process.execPath, ['-e', script], { uid: 65534, gid: 65534, encoding: 'utf8' });
  t.is(result.status, 0, result.stderr);
  t.deepEqual(JSON.parse(result.stdout), { kind: 'error', errno: 'EPERM' });
  await delay(SETTLE_MS);
  t.deepEqual(receivedSignals(job), []);
});

test('waitExit resolves after SIGKILL', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const waiting = waitExit(job.identity, 5000);
  t.is(signalVerified(job.identity, 'SIGKILL', { group: true }).kind, 'signalled');
  t.deepEqual(await waiting, { kind: 'exited' });
});

test('waitExit times out while the process lives on, and leaves it alive', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const started = Date.now();
  t.deepEqual(await waitExit(job.identity, 150), { kind: 'timeout' });
  t.true(Date.now() - started >= 140);
  t.is(signalVerified(job.identity, 0).kind, 'signalled');
});

test('waitExit on a process that cannot be proved answers at once', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const wrong = { ...job.identity, pidfsIno: '1' };
  t.deepEqual(await waitExit(wrong, 5000), { kind: 'identity_mismatch', reason: 'pidfs_ino' });
  await job.stop();
  t.deepEqual(await waitExit(job.identity, 5000), { kind: 'already_exited' });
});
