// What is left of a job's process group, seen from /proc (read only), and a teardown that ends it
// through the verified path: each member's identity is captured from its own pidfd and checked to
// be in the group before SIGKILL goes through that same identity. Never a bare PID, and never a
// group id another test's group took over after ours ended.

import type { ExecutionContext } from 'ava';

import { captureIdentity, signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { parseHandle } from '../../lib/process/index';
import { scanProcesses } from '../../lib/process/proc-scan';

/** The live members of process group `pgid` (zombies excluded: they are already gone). */
export function groupMembers(pgid: number): ProcessIdentity[] {
  const members: ProcessIdentity[] = [];
  for (const { pid, stat } of scanProcesses()) {
    // 'unreadable': it was exiting while it was read.
    if (stat === null || stat === 'unreadable' || stat.pgid !== pgid || stat.state === 'Z') continue;
    const identity = captureIdentity(pid);
    if (identity !== null && identity.pgid === pgid) members.push(identity);
  }
  return members;
}

/** The group a stored attempt handle leads (the launcher's). */
export function handleGroup(handle: string): number {
  return parseHandle(handle).pgid;
}

/**
 * Whether group `pgid` may still be the group whose leader was `leader` (null: already gone when the
 * test took the group). PIDs wrap at pid_max (32768 here) within a full test run, and a group id is
 * free for reuse once its group is empty. A live process with the PID `pgid` that is not that leader
 * means the number is someone else's now, so the group the test took is gone: nothing of it is left
 * to end, and what is in group `pgid` now belongs to another test.
 */
function stillTheGroup(pgid: number, leader: ProcessIdentity | null): boolean {
  const now = captureIdentity(pgid);
  if (now === null) return true; // the leader is gone; its group id cannot be reused while members are left
  // The pidfs inode tells a reuse within the same clock tick apart, where start ticks cannot.
  return (
    leader !== null &&
    now.bootId === leader.bootId &&
    now.startTicks === leader.startTicks &&
    now.pidfsIno === leader.pidfsIno
  );
}

/** KILLs the group's members, unless `pgid` is another group's now (see stillTheGroup). */
export function killGroupMembers(pgid: number, leader: ProcessIdentity | null = captureIdentity(pgid)): number {
  if (!stillTheGroup(pgid, leader)) return 0;
  let killed = 0;
  for (const member of groupMembers(pgid))
    if (signalVerified(member, 'SIGKILL', { group: false }).kind === 'signalled') killed += 1;
  return killed;
}

/** Registers a teardown that ends whatever is left of the group; its leader is captured now. */
export function reapGroupAtEnd(t: ExecutionContext, pgid: number): void {
  const leader = captureIdentity(pgid);
  t.teardown(() => {
    killGroupMembers(pgid, leader);
  });
}
