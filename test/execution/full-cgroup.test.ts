// A full job (issue 27 "a full cgroup", docs/decisions/0303): a job whose process count hit its
// pids limit, so its own forks fail, is still stopped completely by a cancel (0 survivors), and a
// process outside the job's cgroup is not touched. Where the pids controller can be enabled in
// cgroup v2 the limit is the test subtree's `pids.max`; in a hybrid layout whose pids controller
// is bound to a cgroup v1 hierarchy (this machine: cgroup2 at /sys/fs/cgroup/unified lists no
// `pids`) the v2 limit cannot exist, and the job enters a v1 pids cgroup instead: the same kernel
// limit (fork fails with EAGAIN), said so in the test's log, never passed off as the v2 one.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { launchAttempt } from '../../lib/execution/index';
import { ensureReceiptDirectory } from '../../lib/execution/receipts';
import { LocalProcessController } from '../../lib/process/index';
import { cgroup2Mount, forgetCgroupSubtree } from '../../lib/process/job-cgroup';
import { cgroupPids, cgroupUnavailable, makeCgroup, spawnInCgroup, testSubtree } from '../helpers/cgroup';
import { reapGroupAtEnd } from '../helpers/job-groups';
import { killMarkedAtEnd, MARK_ENV, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { until } from '../helpers/wait';

const PIDS_MAX = 12;
const V1_PIDS_ROOT = '/sys/fs/cgroup/pids';

/** Where a pids limit can be put on the job: the v2 subtree itself, a v1 pids hierarchy, or nowhere. */
function pidsLimitKind(): 'v2' | 'v1' | null {
  const mount = cgroup2Mount();
  if (mount !== null && readFileSync(path.join(mount, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('pids'))
    return 'v2';
  return existsSync(path.join(V1_PIDS_ROOT, 'cgroup.procs')) ? 'v1' : null;
}

const unavailable = cgroupUnavailable();
const kind = unavailable === null ? pidsLimitKind() : null;
const fullTest = kind === null ? test.skip : test.serial;
if (kind === null) {
  test('full cgroup tests are skipped', (t) => {
    t.log(`SKIPPED LOUDLY: ${unavailable ?? 'no pids controller in cgroup v2 and no v1 pids hierarchy'}`);
    t.pass();
  });
}

/**
 * The limit and the line the job runs first to come under it. v2: `+pids` on the mount root and
 * the subtree, `pids.max` on the subtree (it limits every job cgroup below). v1: a pids cgroup the
 * job writes itself into (its v2 membership, the job cgroup, is not changed by that).
 */
function pidsLimit(t: ExecutionContext, subtree: string): { enter: string; current: () => number } {
  if (kind === 'v2') {
    const mount = cgroup2Mount() ?? '/';
    writeFileSync(path.join(mount, 'cgroup.subtree_control'), '+pids');
    writeFileSync(path.join(subtree, 'pids.max'), String(PIDS_MAX));
    return { enter: ':', current: () => Number(readFileSync(path.join(subtree, 'pids.current'), 'utf8')) };
  }
  t.log('pids controller bound to cgroup v1 here: the limit is a v1 pids cgroup (docs/decisions/0303)');
  const limit = path.join(V1_PIDS_ROOT, `pidfence-test-full-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(limit);
  t.teardown(async () => {
    await until(() => readFileSync(path.join(limit, 'cgroup.procs'), 'utf8').trim() === '', {
      what: 'v1 cgroup empty',
    });
    rmdirSync(limit);
  });
  writeFileSync(path.join(limit, 'pids.max'), String(PIDS_MAX));
  return {
    enter: `echo 0 > '${limit}/cgroup.procs'`,
    current: () => Number(readFileSync(path.join(limit, 'pids.current'), 'utf8')),
  };
}

/** Forks `sleep`s as fast as it can; each failed fork (EAGAIN at the limit) touches `failed` and it goes on. */
const FORK_UNTIL_FULL = `perl -e 'while (1) { my $p = fork(); if (!defined $p) { open(my $f, ">", $ARGV[0]); close $f; select(undef, undef, undef, 0.005); next } if ($p == 0) { exec("sleep", "1000") } }'`;

fullTest(
  'a job whose forks fail at its pids limit is stopped completely by a cancel; nothing outside is touched',
  async (t) => {
    const subtree = testSubtree(t, 'full');
    const limit = pidsLimit(t, subtree);
    const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-full-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    ensureReceiptDirectory(dir);
    const failed = path.join(dir, 'fork-failed');
    const mark = uniqueMark('full');
    killMarkedAtEnd(t, mark);
    const innocent = uniqueMark('full-innocent');
    killMarkedAtEnd(t, innocent);
    const neighbour = makeCgroup(subtree, 'neighbour');
    spawnInCgroup(neighbour.directory, 'exec sleep 1000', innocent);
    await until(() => cgroupPids(neighbour.directory).length === 1, { what: 'a neighbour outside the job cgroup' });

    process.env.PIDFENCE_CGROUP = subtree;
    forgetCgroupSubtree();
    t.teardown(() => {
      delete process.env.PIDFENCE_CGROUP;
      forgetCgroupSubtree();
    });
    const attemptId = `${mark.replace(/[^A-Za-z0-9-]/g, '')}-a1`;
    const launched = launchAttempt({
      receiptDirectory: dir,
      runId: 'run-full',
      attemptId,
      token: 'F'.repeat(43),
      command: 'sh',
      args: ['-c', `${limit.enter} && ${FORK_UNTIL_FULL} '${failed}'`],
      env: { ...process.env, [MARK_ENV]: mark },
      cgroupSubtree: subtree,
      leftoverGraceMs: 1_000,
    });
    if (launched.handle === null || launched.pid === null) throw new Error('the launcher was not captured');
    reapGroupAtEnd(t, launched.pid);
    t.is(launched.containment, 'cgroup');
    await until(() => existsSync(failed), { timeoutMs: 15_000, what: 'a fork of the job failed at its limit' });
    t.true(limit.current() >= PIDS_MAX - 1, `the job is at its limit (${limit.current()} of ${PIDS_MAX})`);

    const answer = await new LocalProcessController().requestTermination({
      attemptPid: launched.pid,
      handle: launched.handle,
      graceMs: 1_000,
    });
    t.is(answer.result, 'termination_requested');
    t.true(answer.exitObserved, 'populated 0 was seen: the stop reached the whole tree');
    await launched.exited;
    t.deepEqual(markedProcesses(mark), [], '0 survivors');
    t.deepEqual(cgroupPids(path.join(subtree, attemptId)), []);
    t.is(markedProcesses(innocent).length, 1, 'the process outside the job cgroup lives');
  },
);
