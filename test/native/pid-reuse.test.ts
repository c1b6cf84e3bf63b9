// A PID really reused by another process, forced as root through ns_last_pid (FACTS.md). The
// pidfs inode tells the two apart even when the reuse falls in the same clock tick, where
// boot id + PID + start ticks cannot. The reuse dance runs in a small C fixture so it takes
// microseconds; the identities and the signals under test all go through pidfence.
import * as fs from 'node:fs';
import * as path from 'node:path';

import test from 'ava';

import { signalVerified } from '../../lib/native/index';
import { compileReuseFixture, runReuseTrial } from '../helpers/pid-reuse';

const MIN_TRIALS = 20;
// Under heavy load a scheduling delay can push the two forks into different ticks; keep going
// (a trial takes milliseconds) until one shares it.
const MAX_TRIALS = 2_000;

test('gate 8: a reused PID, even within the same clock tick, is an identity_mismatch by pidfs inode, also for a handle without the inode, and the new process receives nothing', async (t) => {
  t.is(process.getuid?.(), 0, 'forcing a PID reuse needs root (ns_last_pid)');
  const binary = compileReuseFixture();
  t.teardown(() => fs.rmSync(path.dirname(binary), { recursive: true, force: true }));
  let reuses = 0;
  let sameTick = 0;
  let trials = 0;
  let innocentsSignalled = 0;
  for (; trials < MAX_TRIALS && (trials < MIN_TRIALS || sameTick === 0); trials++) {
    await runReuseTrial(binary, ({ original, successor }) => {
      if (successor === null) return; // another process took the PID first
      reuses++;
      t.is(successor.pid, original.pid);
      t.not(successor.pidfsIno, original.pidfsIno, 'pidfs inodes never repeat within a boot');
      t.deepEqual(signalVerified(original, 'SIGKILL', { group: true }), {
        kind: 'identity_mismatch',
        reason: 'pidfs_ino',
      });
      t.deepEqual(signalVerified(original, 'SIGTERM'), { kind: 'identity_mismatch', reason: 'pidfs_ino' });
      t.is(
        signalVerified(successor, 0, { group: true }).kind,
        'signalled',
        'the successor survived: it received nothing',
      );
      // The same old process as a handle without its inode, as a caller that dropped it (or a
      // store row written without one) would hand it over. On a pidfs kernel it is refused
      // before start ticks are looked at, so even a same-tick reuse, where start ticks match
      // the successor, reaches nobody (docs/decisions/0006).
      const { pidfsIno: _ino, ...startTicksOnly } = original;
      const sharedTick = original.startTicks === successor.startTicks;
      if (sharedTick) sameTick++;
      const refusal = signalVerified(startTicksOnly, 'SIGKILL', { group: true });
      if (refusal.kind === 'signalled') innocentsSignalled++;
      t.deepEqual(refusal, { kind: 'identity_mismatch', reason: 'pidfs_ino' });
      t.is(
        signalVerified(successor, 0, { group: true }).kind,
        'signalled',
        'the successor survived the inode-less handle',
      );
    });
  }
  t.log(
    `${reuses} of ${trials} forced reuses took the PID, ${sameTick} within the same clock tick; ${innocentsSignalled} innocents signalled through an inode-less handle`,
  );
  t.is(innocentsSignalled, 0, 'an inode-less handle of this boot signals no successor');
  t.true(reuses >= trials / 2, 'PID reuse could be forced');
  t.true(sameTick >= 1, 'at least one reuse fell within the same clock tick');
});
