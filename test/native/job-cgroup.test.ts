// The job cgroup core (docs/decisions/0180) with real processes in a real cgroup v2 subtree: found by
// its id only, members signalled through pidfds proved to be in it, `populated 0` told by inotify,
// and a cgroup re-created under the same name never touched.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import {
  capabilities,
  cgroupFreeze,
  cgroupKill,
  cgroupRead,
  cgroupRemove,
  cgroupSignalMembers,
  cgroupWaitEmpty,
  validateCgroupSubtree,
} from '../../lib/native/index';
import { stopJobCgroup } from '../../lib/process/job-cgroup';
import { cgroupPids, makeCgroup, spawnInCgroup, testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';
import { killMarkedAtEnd, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { delay, until } from '../helpers/wait';

const cgroupTest = cgroupTestOrSkip('job cgroup');

const ESCAPES =
  'setsid sleep 1000 & ( setsid sh -c "sleep 1000 & exit 0" & ); perl -e "setpgrp(0, 0); sleep 1000" & nohup sleep 1000 >/dev/null 2>&1 & sleep 1000';

for (const proof of ['auto', 'listing'] as const) {
  cgroupTest(
    `job cgroup (proof ${proof}): every escape pattern is a member; TERM reaches each through its proved pidfd; populated 0 comes by notification`,
    async (t) => {
      const subtree = testSubtree(t, `core-${proof}`);
      const { directory, id } = makeCgroup(subtree, 'job');
      const mark = uniqueMark(`cgroup-core-${proof}`);
      killMarkedAtEnd(t, mark);
      spawnInCgroup(directory, ESCAPES, mark);
      await until(() => markedProcesses(mark).length >= 6, { timeoutMs: 10_000, what: 'the job and its escapees' });
      const ref = { subtree, id };
      t.like(cgroupRead(ref), { kind: 'ok', populated: true, frozen: false });
      t.is(cgroupFreeze(ref, true).kind, 'ok');
      await until(
        () => {
          const now = cgroupRead(ref);
          return now.kind === 'ok' && now.frozen;
        },
        { what: 'frozen 1' },
      );
      const members = cgroupPids(directory).length;
      const term = cgroupSignalMembers(ref, 'SIGTERM', { proof });
      t.like(term, { kind: 'ok', signalled: members });
      // Where the kernel answers PIDFD_GET_INFO the strong proof is used; without it (before 6.13, or
      // qemu-user, which answers ENOSYS) the listing proof; 'listing' forces the second one here.
      t.is(term.proof, proof === 'auto' && capabilities().pidfdGetInfo ? 'pidfd-info' : 'listing');
      t.is(cgroupFreeze(ref, false).kind, 'ok');
      t.is(await cgroupWaitEmpty(ref, 10_000), 'empty');
      t.deepEqual(markedProcesses(mark), [], 'no escapee lives on');
      t.is(cgroupRemove(ref).kind, 'ok');
      t.is(cgroupRead(ref).kind, 'gone');
    },
  );
}

/**
 * Removes an emptied cgroup as a launcher does, at once: `populated 0` can come a moment before the
 * killed member has finished exiting, and rmdir answers busy until it has. Spun on first (the
 * kernel's part takes microseconds; the delayed notification is still pending), then retried between
 * turns of the event loop (the member may wait to be reaped by this process).
 */
async function removeOnceEmpty(ref: { subtree: string; id: string }): Promise<string> {
  const spinUntil = performance.now() + 50;
  let removed = cgroupRemove(ref).kind;
  while (removed === 'busy' && performance.now() < spinUntil) removed = cgroupRemove(ref).kind;
  for (let turn = 0; removed === 'busy' && turn < 200; turn += 1) {
    await delay(10);
    removed = cgroupRemove(ref).kind;
  }
  return removed;
}

cgroupTest(
  'job cgroup: a wait for populated 0 sees the end of a cgroup removed before the kernel sent its delayed notification',
  async (t) => {
    // The kernel sends at most one cgroup.events notification per 10 ms and drops a delayed one when
    // the cgroup is removed: a job that ends at TERM right after the thaw, and a launcher that
    // removes its emptied cgroup at once, left the wait with no event (docs/decisions/0395).
    const TRIALS = 10;
    const outcomes: string[] = [];
    for (let trial = 0; trial < TRIALS; trial += 1) {
      const subtree = testSubtree(t, `late-${trial}`);
      const { directory, id } = makeCgroup(subtree, 'job');
      const mark = uniqueMark(`cgroup-late-${trial}`);
      killMarkedAtEnd(t, mark);
      spawnInCgroup(directory, 'exec sleep 1000', mark);
      await until(() => markedProcesses(mark).length === 1, { what: 'the job in its cgroup' });
      const ref = { subtree, id };
      const waited = cgroupWaitEmpty(ref, 2_000);
      t.is(cgroupFreeze(ref, true).kind, 'ok');
      t.is(cgroupFreeze(ref, false).kind, 'ok'); // a notification now: the next one is held back
      t.is(cgroupKill(ref).kind, 'ok');
      while (cgroupRead(ref).kind === 'ok' && (cgroupRead(ref) as { populated: boolean }).populated) {
        // the kill takes effect within a few milliseconds: the delayed notification is still pending
      }
      t.is(await removeOnceEmpty(ref), 'ok');
      const outcome = await waited;
      outcomes.push(typeof outcome === 'string' ? outcome : outcome.kind);
    }
    t.deepEqual(
      outcomes,
      Array.from({ length: TRIALS }, () => 'empty'),
    );
  },
);

cgroupTest(
  'job cgroup: a wait whose event loop stalled past its timeout looks once more: a cgroup that emptied meanwhile is empty, not timed out',
  async (t) => {
    // A worker host's loop stalled for seconds in a mass stop; the grace's timer then ran before the
    // notification that the job had ended, and a job that ended on TERM was killed as if it had not
    // (docs/decisions/0447).
    const subtree = testSubtree(t, 'stalled');
    const { directory, id } = makeCgroup(subtree, 'job');
    const mark = uniqueMark('cgroup-stalled');
    killMarkedAtEnd(t, mark);
    spawnInCgroup(directory, 'exec sleep 1000', mark);
    await until(() => cgroupPids(directory).length === 1, { what: 'the job in its cgroup' });
    const ref = { subtree, id };
    const waited = cgroupWaitEmpty(ref, 200);
    await delay(100); // the wait's own look, 50 ms after its start, found the job there
    // Stalled outside the timers' phase, as an I/O callback stalls: the next turn runs timers first.
    await new Promise((resolve) => setImmediate(resolve));
    t.is(cgroupKill(ref).kind, 'ok');
    const stalledUntil = performance.now() + 600;
    while (performance.now() < stalledUntil) {
      // the event loop stalls past the wait's timeout while the job ends
    }
    t.like(cgroupRead(ref), { kind: 'ok', populated: false }, 'the job ended during the stall');
    t.is(await waited, 'empty');
  },
);

cgroupTest(
  'job cgroup (proof listing): more members than one batch of pidfds are all reached, and a process outside is not',
  async (t) => {
    const subtree = testSubtree(t, 'batch');
    const { directory, id } = makeCgroup(subtree, 'job');
    const outside = makeCgroup(subtree, 'outside');
    const mark = uniqueMark('cgroup-batch');
    const innocent = uniqueMark('cgroup-batch-innocent');
    killMarkedAtEnd(t, mark);
    killMarkedAtEnd(t, innocent);
    spawnInCgroup(outside.directory, 'exec sleep 1000', innocent);
    spawnInCgroup(directory, 'i=0; while [ $i -lt 150 ]; do sleep 1000 & i=$((i+1)); done; exec sleep 1000', mark);
    await until(() => cgroupPids(directory).length >= 151, { timeoutMs: 20_000, what: '151 members' });
    await until(() => cgroupPids(outside.directory).length === 1, { what: 'the process outside' });
    await until(() => cgroupPids(directory).length === 151, { what: 'the loop done' });
    const ref = { subtree, id };
    const term = cgroupSignalMembers(ref, 'SIGTERM', { proof: 'listing' });
    t.like(term, { kind: 'ok', signalled: 151, proof: 'listing' });
    t.is(await cgroupWaitEmpty(ref, 10_000), 'empty');
    t.is(markedProcesses(innocent).length, 1, 'the process in the sibling cgroup lives');
  },
);

cgroupTest(
  'job cgroup: re-created under the same name it is another cgroup: every call answers gone and its process is not touched',
  async (t) => {
    const subtree = testSubtree(t, 'recreated');
    const first = makeCgroup(subtree, 'job');
    const parked = makeCgroup(subtree, 'parked');
    const mark = uniqueMark('cgroup-recreated');
    killMarkedAtEnd(t, mark);
    spawnInCgroup(first.directory, 'exec sleep 1000', mark);
    await until(() => cgroupPids(first.directory).length === 1, { what: 'the job in its cgroup' });
    // Found once, so its name is remembered (docs/decisions/0420): the guess must be proved, not trusted.
    t.like(cgroupRead({ subtree, id: first.id }), { kind: 'ok', populated: true });
    // Someone else moves the job out, removes its cgroup and makes a new one of the same name.
    writeFileSync(path.join(parked.directory, 'cgroup.procs'), String(cgroupPids(first.directory)[0]));
    await cgroupRemoveDirectory(first.directory);
    const second = makeCgroup(subtree, 'job');
    t.not(second.id, first.id, 'a new id for the same name');
    const innocent = uniqueMark('cgroup-innocent');
    killMarkedAtEnd(t, innocent);
    spawnInCgroup(second.directory, 'exec sleep 1000', innocent);
    await until(() => cgroupPids(second.directory).length === 1, { what: 'a process in the new cgroup' });
    const old = { subtree, id: first.id };
    for (const step of [
      cgroupRead(old),
      cgroupFreeze(old, true),
      cgroupSignalMembers(old, 'SIGKILL'),
      cgroupKill(old),
      cgroupRemove(old),
    ])
      t.is(step.kind, 'gone');
    t.is(await cgroupWaitEmpty(old, 1_000), 'empty', 'a removed cgroup was empty when it was removed');
    t.deepEqual(await stopJobCgroup(old, 100, 1_000), { kind: 'gone' });
    await delay(100);
    t.is(markedProcesses(innocent).length, 1, 'the process in the re-created cgroup lives');
    t.is(markedProcesses(mark).length, 1, 'and so does the moved job: nothing was signalled');
  },
);

async function cgroupRemoveDirectory(directory: string): Promise<void> {
  const { rmdirSync } = await import('node:fs');
  await until(() => cgroupPids(directory).length === 0, { what: 'the cgroup emptied by the move' });
  rmdirSync(directory);
}

cgroupTest(
  'stopJobCgroup: TERM-ignoring members and a fork storm end by cgroup.kill after the grace, 0 survivors',
  async (t) => {
    const subtree = testSubtree(t, 'storm');
    const { directory, id } = makeCgroup(subtree, 'job');
    const mark = uniqueMark('cgroup-storm');
    killMarkedAtEnd(t, mark);
    spawnInCgroup(
      directory,
      `trap "" TERM; setsid sh -c 'trap "" TERM; while :; do sleep 1000 & done' & while :; do (trap "" TERM; sleep 1000) & sleep 0.01; done`,
      mark,
    );
    await until(() => cgroupPids(directory).length >= 20, { timeoutMs: 10_000, what: 'the storm under way' });
    const stopped = await stopJobCgroup({ subtree, id }, 200, 10_000);
    t.is(stopped.kind, 'empty');
    t.like(stopped, { escalated: true });
    t.deepEqual(markedProcesses(mark), [], '0 survivors');
    t.deepEqual(cgroupPids(directory), []);
  },
);

test('bad input: a subtree that is not an absolute path, or an id that is not a u64, is a typed error and touches nothing', (t) => {
  t.throws(() => validateCgroupSubtree('relative/path'), { code: 'ERR_PIDFENCE_INVALID_CGROUP' });
  t.throws(() => validateCgroupSubtree(42), { code: 'ERR_PIDFENCE_INVALID_CGROUP' });
  t.throws(() => cgroupRead({ subtree: '/sys/fs/cgroup', id: '-1' }), { code: 'ERR_PIDFENCE_INVALID_CGROUP_ID' });
  t.throws(() => cgroupSignalMembers({ subtree: '/sys/fs/cgroup', id: '1' }, 0), {
    code: 'ERR_PIDFENCE_INVALID_SIGNAL',
  });
  const unknownProof = { proof: 'guess' } as unknown as { proof: 'auto' };
  t.throws(() => cgroupSignalMembers({ subtree: '/sys/fs/cgroup', id: '1' }, 'SIGTERM', unknownProof), {
    code: 'ERR_PIDFENCE_INVALID_OPTIONS',
  });
  const unknownKey = { proof: 'auto', fast: true } as unknown as { proof: 'auto' };
  t.throws(() => cgroupSignalMembers({ subtree: '/sys/fs/cgroup', id: '1' }, 'SIGTERM', unknownKey), {
    code: 'ERR_PIDFENCE_INVALID_OPTIONS',
  });
});
