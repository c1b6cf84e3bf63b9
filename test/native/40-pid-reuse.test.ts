// A PID really reused by another process, forced as root through ns_last_pid (FACTS.md). The
// pidfs inode tells the two apart even when the reuse falls in the same clock tick, where
// boot id + PID + start ticks cannot.
import * as fs from 'node:fs';

import test, { type ExecutionContext } from 'ava';

import { signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { spawnJob, type Job } from '../helpers/processes';

const NS_LAST_PID = '/proc/sys/kernel/ns_last_pid';
// Under load most forced reuses land in a later tick; keep trying until one shares it.
const MAX_TRIALS = 300;
const SAME_TICK_WANTED = 1;

interface Reuse {
  readonly original: ProcessIdentity;
  readonly successor: Job;
}

// Starts a process, kills and reaps it, then makes the next fork take its PID. Returns null
// when another process on the machine took the PID first (the caller retries).
async function forceReuse(t: ExecutionContext): Promise<Reuse | null> {
  const original = spawnJob(t, 'sleep', ['30']);
  await original.stop(); // verified SIGKILL to its group, then reaped by Node
  fs.writeFileSync(NS_LAST_PID, String(original.identity.pid - 1));
  const successor = spawnJob(t, 'sleep', ['30']);
  if (successor.identity.pid !== original.identity.pid) {
    await successor.stop();
    return null;
  }
  return { original: original.identity, successor };
}

test('a reused PID, even within the same clock tick, is an identity_mismatch by pidfs inode and the new process receives nothing', async (t) => {
  t.is(process.getuid?.(), 0, 'forcing a PID reuse needs root (ns_last_pid)');
  let reuses = 0;
  let sameTick = 0;
  for (let trial = 0; trial < MAX_TRIALS && sameTick < SAME_TICK_WANTED; trial++) {
    const reuse = await forceReuse(t);
    if (reuse === null) continue;
    reuses++;
    const { original, successor } = reuse;
    t.not(original.pidfsIno, successor.identity.pidfsIno, 'pidfs inodes never repeat within a boot');
    if (original.startTicks === successor.identity.startTicks) sameTick++;

    t.deepEqual(signalVerified(original, 'SIGKILL', { group: true }), { outcome: 'identity_mismatch', reason: 'pidfs_ino' });
    t.deepEqual(signalVerified(original, 'SIGTERM'), { outcome: 'identity_mismatch', reason: 'pidfs_ino' });
    // The successor survived both: it received no fatal signal.
    t.is(signalVerified(successor.identity, 0, { group: true }).outcome, 'signalled');

    if (original.startTicks === successor.identity.startTicks) {
      // Why the inode matters: with start ticks alone the proof passes for the wrong process.
      // Signal 0 only, so nothing is delivered.
      const { pidfsIno: _ino, ...startTicksOnly } = original;
      t.is(signalVerified(startTicksOnly, 0, { group: true }).outcome, 'signalled');
    } else {
      const { pidfsIno: _ino, ...startTicksOnly } = original;
      t.deepEqual(signalVerified(startTicksOnly, 'SIGKILL', { group: true }), { outcome: 'identity_mismatch', reason: 'start_ticks' });
    }
    await successor.stop();
  }
  t.log(`${reuses} forced reuses, ${sameTick} within the same clock tick`);
    t.true(sameTick >= 1, 'at least one reuse fell within the same clock tick');
});
