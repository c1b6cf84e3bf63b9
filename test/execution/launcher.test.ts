// The native launcher's duties (docs/decisions/0050, 0071, 0150-0153), each with real processes:
// its order on fd 3, signals, start failures, leftovers stopped after the job's leader ended (or
// kept), a fork storm, and the receipt on a full disk.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statfsSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, getPriority, tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { launchAttempt, LEFTOVER_POLICY_DEFAULT, type LaunchRequest, type Launched } from '../../lib/execution/index';
import {
  ensureReceiptDirectory,
  parseReceipt,
  readReceipt,
  type CompletionReceiptV2,
} from '../../lib/execution/receipts';
import { encodeLaunchOrder, JOB_NICE_MAX, ORDER_MAX_ARG_BYTES } from '../../lib/execution/launch-order';
import { captureIdentity, launcherPath, signalVerified } from '../../lib/native/index';
import { LocalProcessController, parseHandle } from '../../lib/process/index';
import { cgroupUnavailable, testSubtree } from '../helpers/cgroup';
import { groupMembers, reapGroupAtEnd } from '../helpers/job-groups';
import { fixturesDir } from '../helpers/processes';
import { killMarkedAtEnd, MARK_ENV, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { delay, until } from '../helpers/wait';

const TOKEN = 'A'.repeat(43);
/** A valid order of `true`; the order tests change one field of it at a time. */
const MINIMAL_ORDER = {
  receiptDirectory: '/tmp',
  runId: 'r',
  attemptId: 'a',
  seq: 1,
  token: TOKEN,
  command: 'true',
  args: [] as string[],
  leftovers: 'stop',
  leftoverGraceMs: 0,
  log: null,
} as const;

function receiptDirectory(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-launcher-'));
  ensureReceiptDirectory(dir);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Started {
  readonly launched: Launched;
  readonly pgid: number;
  readonly attemptId: string;
  readonly mark: string;
}

/** Starts `sh -c script` through the launcher; every process it starts carries the mark. */
function launch(t: ExecutionContext, dir: string, script: string, extra: Partial<LaunchRequest> = {}): Started {
  const mark = uniqueMark('launcher');
  killMarkedAtEnd(t, mark);
  const attemptId = `${mark.replace(/[^A-Za-z0-9-]/g, '')}-a1`;
  const launched = launchAttempt({
    receiptDirectory: dir,
    runId: 'run-launcher',
    attemptId,
    token: TOKEN,
    command: 'sh',
    args: ['-c', script],
    env: { ...process.env, [MARK_ENV]: mark },
    // A subtree of its own where cgroups can be used, removed when the test ends: a job these tests
    // keep or kill leaves its cgroup behind, and no runner here removes it (docs/decisions/0300).
    ...(cgroupUnavailable() === null ? { cgroupSubtree: testSubtree(t, 'launcher') } : {}),
    ...extra,
  });
  if (launched.handle === null) throw new Error('the launcher was not captured');
  const pgid = parseHandle(launched.handle).pgid;
  reapGroupAtEnd(t, pgid);
  return { launched, pgid, attemptId, mark };
}

function receiptOf(dir: string, attemptId: string): CompletionReceiptV2 {
  const read = readReceipt(dir, attemptId);
  if (read.kind !== 'parsed') throw new Error(`receipt ${read.kind}`);
  if (read.receipt.v !== 2) throw new Error(`receipt v${read.receipt.v}, not v2`);
  return read.receipt;
}

test("the launch order travels on fd 3 only: the launcher's cmdline and environ hold neither command, arguments nor token, and fd 3 is closed", async (t) => {
  const dir = receiptDirectory(t);
  const { launched, pgid } = launch(t, dir, 'sleep 30 # secret-arg-7d2');
  await until(() => groupMembers(pgid).length === 3, { timeoutMs: 10_000, what: 'launcher, shell, sleep' });
  const cmdline = readFileSync(`/proc/${pgid}/cmdline`, 'utf8');
  const environ = readFileSync(`/proc/${pgid}/environ`, 'utf8');
  t.is(cmdline, `${launcherPath()}\0`);
  t.false(cmdline.includes('secret-arg-7d2') || environ.includes('secret-arg-7d2'));
  t.false(cmdline.includes(TOKEN) || environ.includes(TOKEN));
  // fd 3 may be reused (the job cgroup's directory, docs/decisions/0180): never by the order's pipe.
  t.false(
    readdirSync(`/proc/${pgid}/fd`).some(
      (fd) => readlinkSync(`/proc/${pgid}/fd/${fd}`).startsWith('pipe:') && fd === '3',
    ),
    'the order pipe is closed',
  );
  t.true(launched.pid === pgid);
});

test('TERM to the launcher alone is ignored; the job has default dispositions and an empty mask; a group TERM ends the job and the receipt says SIGTERM', async (t) => {
  const dir = receiptDirectory(t);
  const status = path.join(dir, 'status');
  const { launched, pgid, attemptId } = launch(
    t,
    dir,
    `grep -E '^Sig(Blk|Ign)' /proc/self/status > ${status}; exec sleep 30`,
  );
  await until(() => existsSync(status) && readFileSync(status, 'utf8').split('\n').length >= 3, {
    timeoutMs: 10_000,
    what: 'the job wrote its signal state',
  });
  t.deepEqual(
    readFileSync(status, 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.replace(/\s+/g, ' ')),
    ['SigBlk: 0000000000000000', 'SigIgn: 0000000000000000'],
  );
  const launcher = captureIdentity(pgid);
  if (launcher === null) throw new Error('launcher gone');
  t.is(signalVerified(launcher, 'SIGTERM', { group: false }).kind, 'signalled');
  await delay(200);
  t.is(groupMembers(pgid).length, 2, 'launcher and job live on after a TERM to the launcher');
  t.is(signalVerified(launcher, 'SIGTERM', { group: true }).kind, 'signalled');
  await launched.exited;
  t.like(receiptOf(dir, attemptId), { exitCode: null, signal: 'SIGTERM', spawnFailed: false, leftovers: 0 });
});

test('a receipt v2 has the boot clock and the boot id; exit codes pass through', async (t) => {
  const dir = receiptDirectory(t);
  const { launched, attemptId } = launch(t, dir, 'exit 7');
  await launched.exited;
  const receipt = receiptOf(dir, attemptId);
  t.like(receipt, {
    v: 2,
    runId: 'run-launcher',
    attemptId,
    seq: 1,
    token: TOKEN,
    exitCode: 7,
    signal: null,
    spawnFailed: false,
    leftovers: 0,
  });
  t.is(receipt.bootId, readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  t.true(receipt.finishedBootMs >= receipt.startedBootMs && receipt.startedBootMs > 0);
  t.true(Math.abs(receipt.finishedAtMs - Date.now()) < 60_000);
});

test('a receipt read: absent, parsed, and a link in its place (to a real receipt or dangling) is malformed', async (t) => {
  const dir = receiptDirectory(t);
  const { launched, attemptId } = launch(t, dir, 'exit 0');
  t.is(readReceipt(dir, 'never-launched').kind, 'absent');
  await launched.exited;
  t.is(readReceipt(dir, attemptId).kind, 'parsed');
  // Another attempt's path made a link, to the real receipt and then to nothing (docs/decisions/0421).
  symlinkSync(path.join(dir, `${attemptId}.receipt`), path.join(dir, 'linked.receipt'));
  t.is(readReceipt(dir, 'linked').kind, 'malformed');
  symlinkSync(path.join(dir, 'nowhere.receipt'), path.join(dir, 'dangling.receipt'));
  t.is(readReceipt(dir, 'dangling').kind, 'malformed');
});

test('start failures: 127 for a missing command, 126 for a file that is not executable, both marked spawnFailed', async (t) => {
  const dir = receiptDirectory(t);
  const plain = path.join(dir, 'not-executable');
  writeFileSync(plain, '#!/bin/sh\nexit 0\n');
  chmodSync(plain, 0o644);
  for (const [command, exitCode] of [
    ['pidfence-no-such-command-9f1', 127],
    [plain, 126],
  ] as const) {
    const launched = launchAttempt({
      receiptDirectory: dir,
      runId: 'run-launcher',
      attemptId: `fail-${exitCode}`,
      token: TOKEN,
      command,
      args: [],
    });
    await launched.exited;
    t.like(receiptOf(dir, `fail-${exitCode}`), { exitCode, signal: null, spawnFailed: true });
  }
});

test('a launcher without a usable order refuses with a sentence and status 2', (t) => {
  for (const order of [Buffer.from('{"json":"no longer"}'), encodeLaunchOrder(MINIMAL_ORDER).subarray(0, 30)]) {
    const child = spawnSyncWithOrder(order);
    t.is(child.status, 2);
    t.regex(child.stderr, /no usable order on fd 3 .*started by pidfence, not by hand/);
  }
  t.throws(() => encodeLaunchOrder({ ...MINIMAL_ORDER, args: ['x'.repeat(ORDER_MAX_ARG_BYTES + 1)] }), {
    code: 'ERR_PIDFENCE_INVALID_COMMAND',
  });
  t.throws(() => encodeLaunchOrder({ ...MINIMAL_ORDER, args: ['a\0b'] }), { code: 'ERR_PIDFENCE_INVALID_COMMAND' });
  t.throws(() => encodeLaunchOrder({ ...MINIMAL_ORDER, leftovers: 'maybe' as 'stop' }), {
    code: 'ERR_PIDFENCE_INVALID_OPTIONS',
  });
  t.is(LEFTOVER_POLICY_DEFAULT, 'stop');
});

function spawnSyncWithOrder(order: Uint8Array): { status: number | null; stderr: string } {
  try {
    execFileSync('sh', ['-c', `exec "$0" 3<&0 </dev/null`, launcherPath()], {
      input: order,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    return { status: 0, stderr: '' };
  } catch (error) {
    const failed = error as { status: number | null; stderr: Buffer };
    return { status: failed.status, stderr: failed.stderr.toString('utf8') };
  }
}

// Each escapes the job's process group, so a group stop never reaches it; the launcher is their
// subreaper once their parent ended, and stops them after the job's leader exited.
const ESCAPES: ReadonlyArray<readonly [string, string]> = [
  ['a setsid child', 'setsid sleep 1000 & sleep 0.3'],
  ['a double-fork daemon (fork, setsid, fork)', '( setsid sh -c "sleep 1000 & exit 0" & ); sleep 0.3'],
  ['a setpgid(0, 0) child', `perl -e 'setpgrp(0, 0); sleep 1000' & sleep 0.3`],
];

for (const [name, script] of ESCAPES) {
  test(`leftovers: ${name} is stopped after the job's leader exits and counted in the receipt`, async (t) => {
    const dir = receiptDirectory(t);
    const { launched, attemptId, mark } = launch(t, dir, script, { leftoverGraceMs: 2_000 });
    await launched.exited;
    t.deepEqual(markedProcesses(mark), [], 'nothing the job started lives on');
    t.like(receiptOf(dir, attemptId), { exitCode: 0, signal: null, leftovers: 1 });
  });
}

test('leftovers: with keep, a setsid child lives on and the receipt counts nothing', async (t) => {
  const dir = receiptDirectory(t);
  const { launched, attemptId, mark } = launch(t, dir, ESCAPES[0]?.[1] ?? '', { leftovers: 'keep' });
  await launched.exited;
  t.is(markedProcesses(mark).length, 1, 'the setsid sleep was kept');
  t.like(receiptOf(dir, attemptId), { exitCode: 0, leftovers: 0 });
});

test('job log with leftovers kept: a drainer goes on copying what they write after the launcher ended, and they are not killed by SIGPIPE', async (t) => {
  const dir = receiptDirectory(t);
  const logs = path.join(dir, 'logs');
  mkdirSync(logs, { mode: 0o700 });
  const trigger = path.join(dir, 'launcher-ended');
  const script = `echo leader-line; setsid sh -c 'while [ ! -e ${trigger} ]; do sleep 0.05; done; echo kept-line-1; sleep 0.2; echo kept-line-2' & sleep 0.1`;
  const { launched, attemptId, mark } = launch(t, dir, script, { leftovers: 'keep', log: { directory: logs } });
  await launched.exited;
  t.like(receiptOf(dir, attemptId), { exitCode: 0, leftovers: 0 });
  const file = path.join(logs, 'run-launcher.log');
  t.is(readFileSync(file, 'utf8'), 'leader-line\n');
  writeFileSync(trigger, ''); // only now, with the launcher gone, does the kept process write
  await until(() => readFileSync(file, 'utf8') === 'leader-line\nkept-line-1\nkept-line-2\n', {
    timeoutMs: 10_000,
    what: "the kept process's lines",
  });
  await until(() => markedProcesses(mark).length === 0, {
    what: 'the kept process and the drainer ended on their own',
  });
});

test("the order's log section: a bad one is refused by the writer (typed) and by the launcher (status 2)", (t) => {
  const order = MINIMAL_ORDER;
  const log = { directory: '/tmp', maxBytes: 16_384, keep: 0, teeStdout: false, teeStderr: false };
  for (const bad of [
    { ...log, directory: 'relative' },
    { ...log, maxBytes: 1_024 },
    { ...log, keep: 21 },
  ]) {
    t.throws(() => encodeLaunchOrder({ ...order, log: bad }), { code: 'ERR_PIDFENCE_INVALID_LOG_OPTIONS' });
  }
  const good = encodeLaunchOrder({ ...order, log });
  // The cap is the u32 after the directory, before keep, tee and the nice increment; 1 KiB is under the launcher's floor.
  const small = Buffer.from(good);
  small.writeUInt32LE(1_024, small.length - 16);
  const refused = spawnSyncWithOrder(small);
  t.is(refused.status, 2);
  t.regex(refused.stderr, /its log size is out of range/);
});

/** Field 19 of /proc/<pid>/stat: the process's nice value. */
function niceOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

test("jobNice: the job and what it starts run that much nicer than the runner, while the launcher keeps the runner's priority (docs/decisions/0441)", async (t) => {
  const own = getPriority();
  t.true(own <= 9, `this test needs a runner below nice 10 (it runs at ${own})`);
  const dir = receiptDirectory(t);
  for (const [jobNice, expected] of [
    [undefined, own],
    [10, own + 10],
    [JOB_NICE_MAX, 19],
  ] as const) {
    const { launched, pgid } = launch(t, dir, 'sleep 30 & wait', jobNice === undefined ? {} : { jobNice });
    await until(() => groupMembers(pgid).length === 3, { timeoutMs: 10_000, what: 'launcher, shell, sleep' });
    const members = groupMembers(pgid);
    t.is(niceOf(pgid), own, `the launcher stays at the runner's nice (jobNice ${jobNice})`);
    t.deepEqual(
      members.filter((member) => member.pid !== pgid).map((member) => niceOf(member.pid)),
      [expected, expected],
      `the job's shell and its sleep (jobNice ${jobNice})`,
    );
    t.true(launched.pid === pgid);
  }
});

test("the order's nice increment: a bad one is refused by the writer (typed) and by the launcher (status 2)", (t) => {
  for (const bad of [-1, JOB_NICE_MAX + 1, 1.5, Number.NaN, '10' as unknown as number]) {
    t.throws(() => encodeLaunchOrder({ ...MINIMAL_ORDER, jobNice: bad }), {
      code: 'ERR_PIDFENCE_INVALID_JOB_NICE',
      message: /^jobNice \(--job-nice\) must be a whole number from 0 to 19/,
    });
  }
  const good = Buffer.from(encodeLaunchOrder({ ...MINIMAL_ORDER, jobNice: JOB_NICE_MAX }));
  t.is(good.readUInt32LE(good.length - 4), JOB_NICE_MAX, 'the increment is the last field');
  good.writeUInt32LE(JOB_NICE_MAX + 1, good.length - 4);
  const refused = spawnSyncWithOrder(good);
  t.is(refused.status, 2);
  t.regex(refused.stderr, /its nice increment is cut short or out of range/);
  const cut = spawnSyncWithOrder(good.subarray(0, good.length - 4));
  t.is(cut.status, 2);
  t.regex(cut.stderr, /its nice increment is cut short or out of range/);
});

test('leftovers: a TERM-ignoring leftover is KILLed after the grace', async (t) => {
  const dir = receiptDirectory(t);
  const { launched, attemptId, mark } = launch(t, dir, `setsid sh -c 'trap "" TERM; sleep 1000' & sleep 0.3`, {
    leftoverGraceMs: 300,
  });
  const started = performance.now();
  await launched.exited;
  t.true(performance.now() - started >= 500, 'the grace was given');
  t.deepEqual(markedProcesses(mark), []);
  t.true(receiptOf(dir, attemptId).leftovers >= 1);
});

test('leftovers: a fork storm converges to 0 survivors', async (t) => {
  const dir = receiptDirectory(t);
  const storm = 'for i in 1 2 3 4; do ( while :; do setsid sleep 100 & done ) & done; sleep 0.5';
  const { launched, attemptId, mark } = launch(t, dir, storm, { leftoverGraceMs: 500 });
  await launched.exited;
  t.deepEqual(markedProcesses(mark), [], '0 survivors');
  t.true(receiptOf(dir, attemptId).leftovers >= 5, 'the loops and their sleeps were stopped');
});

/** test/fixtures/unrun-child.c, compiled once for this file into a directory removed at the end. */
let unrunChild: string | null = null;
test.before(() => {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-unrun-'));
  unrunChild = path.join(dir, 'unrun-child');
  execFileSync('cc', ['-O2', '-Wall', '-Werror', '-o', unrunChild, path.join(fixturesDir, 'unrun-child.c')]);
});
test.after.always(() => {
  if (unrunChild !== null) rmSync(path.dirname(unrunChild), { recursive: true, force: true });
});

for (const containment of ['cgroup', 'group'] as const) {
  test(`leftovers, ${containment} containment: a child that has not run yet when its TERM is due gets it once it runs its own program, not only the KILL when the grace ends (docs/decisions/0442)`, async (t) => {
    if (containment === 'cgroup' && cgroupUnavailable() !== null)
      return t.fail(`no cgroup subtree: ${cgroupUnavailable()}`);
    t.true(availableParallelism() >= 2, 'the fixture holds CPU 0 while the launcher runs on another');
    const dir = receiptDirectory(t);
    // The leader ends at once; its child cannot run for 400 ms; the grace is 30 s.
    const { launched, attemptId, mark } = launch(t, dir, `exec '${unrunChild}' 400 sleep 1000`, {
      leftoverGraceMs: 30_000,
      ...(containment === 'group' ? { cgroupSubtree: null } : {}),
    });
    const first = await Promise.race([launched.exited.then(() => 'ended'), delay(15_000).then(() => 'waiting')]);
    t.is(first, 'ended', 'the sleep the child became ended by a TERM, long before the 30 s grace ran out');
    t.deepEqual(markedProcesses(mark), [], 'nothing the job started lives on');
    t.like(receiptOf(dir, attemptId), { exitCode: 0, leftovers: 2 }, 'exit 3: the fixture was refused SCHED_FIFO');
  });
}

function mountSmallTmpfs(t: ExecutionContext): string | null {
  const mount = mkdtempSync(path.join(tmpdir(), 'pidfence-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mount], { stdio: 'ignore' });
  } catch {
    rmSync(mount, { recursive: true, force: true });
    return null;
  }
  t.teardown(() => {
    execFileSync('umount', [mount], { stdio: 'ignore' });
    rmSync(mount, { recursive: true, force: true });
  });
  return mount;
}

test('receipt on a full disk: no temp file is left while it is full, and the success is recorded once space returns', async (t) => {
  const mount = mountSmallTmpfs(t);
  if (mount === null) {
    t.log('SKIPPED LOUDLY: cannot mount a tmpfs here (needs root)');
    t.pass();
    return;
  }
  const dir = path.join(mount, 'receipts');
  ensureReceiptDirectory(dir);
  const filler = path.join(mount, 'filler');
  const free = statfsSync(mount);
  execFileSync('fallocate', ['-l', String(Number(free.bavail) * Number(free.bsize)), filler]);
  // fallocate may leave a partial block: fill what is left byte by byte until ENOSPC.
  const fd = openSync(path.join(mount, 'crumbs'), 'w');
  try {
    for (;;) writeFileSync(fd, Buffer.alloc(512));
  } catch {
    closeSync(fd);
  }
  const { launched, attemptId } = launch(t, dir, 'exit 0');
  let exited = false;
  void launched.exited.then(() => {
    exited = true;
  });
  // Each try removes its temp file at once, so a look between tries finds none.
  let tempSeen = 0;
  for (let i = 0; i < 10; i += 1) {
    await delay(100);
    if (readdirSync(dir).some((name) => name.endsWith('.receipt.tmp'))) tempSeen += 1;
  }
  t.is(tempSeen, 0, 'no temp file stays while the disk is full');
  t.false(exited, 'the launcher waits for space instead of giving up');
  t.is(readReceipt(dir, attemptId).kind, 'absent');
  rmSync(filler);
  rmSync(path.join(mount, 'crumbs'));
  await launched.exited;
  t.like(receiptOf(dir, attemptId), { exitCode: 0, spawnFailed: false });
  t.deepEqual(
    readdirSync(dir).filter((name) => name.endsWith('.tmp')),
    [],
  );
});

test("the job is started in the launcher's process group, which the launcher leads", async (t) => {
  const dir = receiptDirectory(t);
  const { pgid } = launch(t, dir, 'exec sleep 30');
  await until(() => groupMembers(pgid).length === 2, { timeoutMs: 10_000, what: 'launcher and job' });
  const members = groupMembers(pgid);
  t.true(
    members.some((member) => member.pid === pgid),
    'the launcher leads the group',
  );
});

test('the receipt shape check accepts v1 and v2, each with exactly its own keys', (t) => {
  const v1 = {
    v: 1,
    runId: 'r',
    attemptId: 'a',
    seq: 1,
    token: TOKEN,
    exitCode: 0,
    signal: null,
    startedAtMs: 1,
    finishedAtMs: 2,
    spawnFailed: false,
  };
  const v2 = {
    ...v1,
    v: 2,
    bootId: '0f5c2b7e-1d3a-4c9b-8e2f-6a7b8c9d0e1f',
    startedBootMs: 10,
    finishedBootMs: 20,
    leftovers: 3,
  };
  t.like(parseReceipt(JSON.stringify(v1)), { v: 1 });
  t.like(parseReceipt(JSON.stringify(v2)), { v: 2, leftovers: 3 });
  t.like(parseReceipt(JSON.stringify({ ...v2, bootId: null })), { v: 2, bootId: null });
  const { leftovers: _dropped, ...v2WithoutLeftovers } = v2;
  for (const bad of [
    v2WithoutLeftovers,
    { ...v1, leftovers: 0 },
    { ...v2, v: 3 },
    { ...v2, leftovers: -1 },
    { ...v2, bootId: 'not-a-uuid' },
    { ...v2, startedBootMs: 1.5 },
  ]) {
    t.is(parseReceipt(JSON.stringify(bad)), null, JSON.stringify(bad));
  }
});

test('a subtree whose job cgroups have no cgroup.kill or cgroup.freeze (Linux before 5.14) is not used: the job runs in group containment, said so, and a group stop reaches it (docs/decisions/0305)', async (t) => {
  const dir = receiptDirectory(t);
  // A directory that makes subdirectories like a cgroup v2 subtree, but without the cgroup files a
  // whole-tree stop needs: what an old kernel's cgroups lack.
  const subtree = mkdtempSync(path.join(tmpdir(), 'pidfence-old-kernel-'));
  t.teardown(() => rmSync(subtree, { recursive: true, force: true }));
  const { launched, mark } = launch(t, dir, 'exec sleep 1000', { cgroupSubtree: subtree });
  t.is(launched.containment, 'group');
  t.is(parseHandle(launched.handle).cgroupId, undefined, 'the handle names no cgroup');
  t.deepEqual(readdirSync(subtree), [], 'no job cgroup is left in the subtree');
  await until(() => markedProcesses(mark).length === 1, { timeoutMs: 10_000, what: 'the job running' });
  const stopped = await new LocalProcessController().requestTermination({
    attemptPid: launched.pid ?? 0,
    handle: launched.handle ?? '',
    graceMs: 1_000,
  });
  t.is(stopped.result, 'termination_requested');
  await launched.exited;
  t.deepEqual(markedProcesses(mark), []);
});
