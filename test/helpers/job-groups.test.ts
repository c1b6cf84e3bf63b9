// The job-group teardown (test/helpers/job-groups.ts) against a real PID reuse: a test's group that
// ended while its group id went to another test's new group must not take that group down with it.
// pid_max is 32768 here, so within a full test run group ids do come round again.
import * as fs from 'node:fs';
import * as path from 'node:path';

import test from 'ava';

import { signalVerified } from '../../lib/native/index';
import { groupMembers, killGroupMembers } from './job-groups';
import { compileReuseFixture, runReuseTrial } from './pid-reuse';

/** Until one reuse falls within the clock tick of the ended leader, where only the pidfs inode differs. */
const TRIALS_MAX = 2_000;

test('the group teardown leaves alone a group that took over the id of the ended one (a real PID reuse, also within the same clock tick)', async (t) => {
  t.is(process.getuid?.(), 0, 'forcing a PID reuse needs root (ns_last_pid)');
  const binary = compileReuseFixture();
  t.teardown(() => fs.rmSync(path.dirname(binary), { recursive: true, force: true }));
  let reuses = 0;
  let sameTick = 0;
  for (let trial = 0; trial < TRIALS_MAX && sameTick === 0; trial += 1) {
    await runReuseTrial(binary, ({ original, successor }) => {
      if (successor === null) return; // another process took the PID first
      reuses += 1;
      if (successor.startTicks === original.startTicks) sameTick += 1;
      t.is(groupMembers(original.pgid).length, 1, "the successor leads a group with the ended group's id");
      t.is(killGroupMembers(original.pgid, original), 0, 'nothing of the ended group was left to end');
      t.is(signalVerified(successor, 0, { group: true }).kind, 'signalled', 'the successor was not killed');
    });
  }
  t.true(reuses >= 1, 'a PID reuse could be forced');
  t.is(sameTick, 1, 'one reuse fell within the same clock tick, told apart by the pidfs inode alone');
});
