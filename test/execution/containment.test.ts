// What a stop reaches (issue 27, docs/decisions/0180), with real processes and real daemons: every
// escape pattern in cgroup containment and in group containment (forced), a launcher killed first,
// a cgroup re-created under the job's name, and the handle that carries the cgroup's id.
import { mkdtempSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { launchAttempt, type Launched } from '../../lib/execution/index';
import { ensureReceiptDirectory, readReceipt } from '../../lib/execution/receipts';
import { captureIdentity, signalVerified } from '../../lib/native/index';
import { formatHandle, LocalProcessController, parseHandle, spawnGroupLeader } from '../../lib/process/index';
import { forgetCgroupSubtree } from '../../lib/process/job-cgroup';
import { cgroupPids, cgroupUnavailable, makeCgroup, spawnInCgroup, testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';
import { ESCAPES } from '../helpers/escape-patterns';
import { reapGroupAtEnd } from '../helpers/job-groups';
import { killMarkedAtEnd, MARK_ENV, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { ensureDaemonPrograms } from '../helpers/test-tools';
import { delay, until } from '../helpers/wait';

const TOKEN = 'B'.repeat(43);
const skip = cgroupUnavailable();
const cgroupTest = cgroupTestOrSkip('cgroup containment');

interface Started {
  readonly launched: Launched;
  readonly mark: string;
  readonly dir: string;
  readonly attemptId: string;
}

function start(
  t: ExecutionContext,
  script: string,
  cgroupSubtree: string | null,
  extra: { leftovers?: 'keep' } = {},
): Started {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-containment-'));
  ensureReceiptDirectory(dir);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mark = uniqueMark('containment');
  killMarkedAtEnd(t, mark);
  const attemptId = `${mark.replace(/[^A-Za-z0-9-]/g, '')}-a1`;
  const launched = launchAttempt({
    receiptDirectory: dir,
    runId: 'run-containment',
    attemptId,
    token: TOKEN,
    command: 'sh',
    args: ['-c', script],
    env: { ...process.env, [MARK_ENV]: mark, TMPDIR: dir },
    cgroupSubtree,
    leftoverGraceMs: 1_000,
    ...extra,
  });
  if (launched.handle === null || launched.pid === null) throw new Error('the launcher was not captured');
  reapGroupAtEnd(t, launched.pid);
  return { launched, mark, dir, attemptId };
}

async function stop(started: Started, cgroupSubtree: string | null): Promise<string> {
  if (cgroupSubtree === null) process.env.PIDFENCE_CGROUP = 'off';
  else process.env.PIDFENCE_CGROUP = cgroupSubtree;
  forgetCgroupSubtree();
  const { launched } = started;
  const answer = await new LocalProcessController().requestTermination({
    attemptPid: launched.pid ?? 0,
    handle: launched.handle ?? '',
    graceMs: 1_000,
  });
  return answer.result;
}

test.before(() => {
  if (skip === null) ensureDaemonPrograms(); // installed as root; without root every test here is skipped
});

for (const mode of ['cgroup', 'group'] as const) {
  for (const [name, script, least] of ESCAPES) {
    cgroupTest(`${mode} containment: a cancel stops ${name} and everything the job started: 0 survivors`, async (t) => {
      const subtree = mode === 'cgroup' ? testSubtree(t, 'escape') : null;
      const started = start(t, script, subtree);
      t.is(started.launched.containment, mode);
      await until(() => markedProcesses(started.mark).length >= least, { timeoutMs: 15_000, what: `${name} running` });
      t.is(await stop(started, subtree), 'termination_requested');
      await started.launched.exited;
      t.deepEqual(markedProcesses(started.mark), [], 'nothing the job started lives on');
    });
  }
}

cgroupTest(
  'cgroup containment: the handle of a contained job carries its cgroup id; the job is born in that cgroup, the launcher is not',
  async (t) => {
    const subtree = testSubtree(t, 'handle');
    const started = start(t, 'exec sleep 1000', subtree);
    const handle = parseHandle(started.launched.handle);
    t.is(handle.v, 2);
    t.regex(handle.cgroupId ?? '', /^[1-9][0-9]*$/);
    const directory = path.join(subtree, started.attemptId);
    await until(() => cgroupPids(directory).length === 1, { what: 'the job in its cgroup' });
    t.false(
      cgroupPids(directory).includes(handle.pid),
      'the launcher stays outside: a cgroup.kill never takes its receipt away',
    );
    t.is(await stop(started, subtree), 'termination_requested');
    await started.launched.exited;
  },
);

cgroupTest(
  'cgroup containment: with its launcher SIGKILLed first, a cancel still stops the setsid child (group containment cannot: it re-parented to PID 1)',
  async (t) => {
    const subtree = testSubtree(t, 'launcher-death');
    const started = start(t, ESCAPES[0]?.[1] ?? '', subtree);
    await until(() => markedProcesses(started.mark).length >= 3, { what: 'job and setsid child' });
    const launcher = captureIdentity(started.launched.pid ?? 0);
    if (launcher === null) throw new Error('launcher gone');
    t.is(signalVerified(launcher, 'SIGKILL', { group: false }).kind, 'signalled');
    await started.launched.exited;
    t.true(markedProcesses(started.mark).length >= 2, 'the job outlived its launcher');
    t.is(await stop(started, subtree), 'termination_requested');
    t.deepEqual(markedProcesses(started.mark), []);
  },
);

cgroupTest(
  'cgroup containment: a job that leaves a daemon behind ends only once the daemon was stopped, and the receipt counts it',
  async (t) => {
    const subtree = testSubtree(t, 'tree-end');
    const started = start(t, 'dbus-daemon --session --fork --address=unix:path=${TMPDIR}/pidfence-bus-$$', subtree);
    await started.launched.exited;
    t.deepEqual(markedProcesses(started.mark), []);
    const read = readReceipt(started.dir, started.attemptId);
    if (read.kind !== 'parsed' || read.receipt.v !== 2) throw new Error('no receipt v2');
    t.is(read.receipt.leftovers, 1);
    t.deepEqual(cgroupPids(path.join(subtree, started.attemptId)), [], 'its cgroup is empty (and removed)');
  },
);

cgroupTest(
  'cgroup containment: leftovers keep ends with the leader; the daemon lives on in the job cgroup',
  async (t) => {
    const subtree = testSubtree(t, 'keep');
    const started = start(t, 'dbus-daemon --session --fork --address=unix:path=${TMPDIR}/pidfence-bus-$$', subtree, {
      leftovers: 'keep',
    });
    await started.launched.exited;
    t.is(markedProcesses(started.mark).length, 1);
    t.is(cgroupPids(path.join(subtree, started.attemptId)).length, 1);
  },
);

cgroupTest(
  'cgroup containment: a job cgroup re-created under its name between start and stop is refused (identity_mismatch → blocked) and nothing outside is signalled',
  async (t) => {
    const subtree = testSubtree(t, 'recreated');
    const started = start(t, 'exec sleep 1000', subtree);
    const directory = path.join(subtree, started.attemptId);
    await until(() => cgroupPids(directory).length === 1, { what: 'the job in its cgroup' });
    const parked = makeCgroup(subtree, 'parked');
    writeFileSync(path.join(parked.directory, 'cgroup.procs'), String(cgroupPids(directory)[0]));
    await until(() => cgroupPids(directory).length === 0, { what: 'the job moved out' });
    rmdirSync(directory);
    const innocent = uniqueMark('containment-innocent');
    killMarkedAtEnd(t, innocent);
    const again = makeCgroup(subtree, started.attemptId);
    spawnInCgroup(again.directory, 'exec sleep 1000', innocent);
    await until(() => cgroupPids(again.directory).length === 1, { what: 'a stranger in the re-created cgroup' });
    t.is(await stop(started, subtree), 'identity_mismatch');
    await delay(200);
    t.is(markedProcesses(innocent).length, 1, 'the stranger lives');
    t.is(
      markedProcesses(started.mark).length,
      2,
      'launcher and moved job live: the stop was refused, nothing was signalled',
    );
  },
);

cgroupTest(
  'cgroup containment: a job its launcher starts only after the stop found its cgroup empty (and TERMed the launcher, which ignores it) is stopped in the cgroup too: 0 survivors (docs/decisions/0310)',
  async (t) => {
    const subtree = testSubtree(t, 'late-start');
    const cgroup = makeCgroup(subtree, 'late-a1');
    const mark = uniqueMark('containment-late');
    killMarkedAtEnd(t, mark);
    // A stand-in launcher: it survives TERM and, at that TERM, starts its job into the job's cgroup,
    // where the job leaves the launcher's group (setsid) at once.
    const lateJob = `sh -c 'echo 0 > ${cgroup.directory}/cgroup.procs && exec setsid sleep 1000' &`;
    const launcher = spawnGroupLeader('sh', ['-c', `trap "${lateJob}" TERM; while :; do sleep 0.05; done`], {
      env: { ...process.env, [MARK_ENV]: mark },
      stdio: 'ignore',
    });
    if (launcher.handle === null || launcher.identity === null)
      throw new Error('the stand-in launcher was not captured');
    reapGroupAtEnd(t, launcher.identity.pid);
    const handle = formatHandle({ ...parseHandle(launcher.handle), cgroupId: cgroup.id, cgroupSubtree: subtree });
    process.env.PIDFENCE_CGROUP = subtree;
    forgetCgroupSubtree();
    const answer = await new LocalProcessController().requestTermination({
      attemptPid: launcher.identity.pid,
      handle,
      graceMs: 1_000,
    });
    t.is(answer.result, 'termination_requested');
    await until(() => markedProcesses(mark).length === 0, {
      timeoutMs: 5_000,
      what: 'no survivor: the job started after the TERM was stopped through its cgroup',
    });
    t.deepEqual(cgroupPids(cgroup.directory), []);
  },
);

cgroupTest(
  'cgroup containment: a root job child that moves itself out of the job cgroup (the limit of docs/decisions/0180) is still stopped: it stays in its launcher tree, and the launcher stops it as a leftover and counts it',
  async (t) => {
    const subtree = testSubtree(t, 'moved-out');
    const elsewhere = makeCgroup(subtree, 'elsewhere');
    const started = start(
      t,
      `sh -c 'echo 0 > ${elsewhere.directory}/cgroup.procs && exec setsid sleep 1000' & exec sleep 1000`,
      subtree,
    );
    await until(() => cgroupPids(elsewhere.directory).length === 1, { what: 'the child moved out of the job cgroup' });
    t.is(await stop(started, subtree), 'termination_requested');
    await started.launched.exited;
    t.deepEqual(markedProcesses(started.mark), [], 'the moved-out child did not outlive the stop');
    const read = readReceipt(started.dir, started.attemptId);
    if (read.kind !== 'parsed' || read.receipt.v !== 2) throw new Error('no receipt v2');
    t.is(read.receipt.leftovers, 1, 'the launcher reports it reached a leftover');
  },
);
