// What is left of a job's process group, seen from /proc (read only), and a teardown that ends it
// through the verified path: each member's identity is captured from its own pidfd and checked to
// be in the group before SIGKILL goes through that same identity. Never a bare PID.

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

export function killGroupMembers(pgid: number): number {
  let killed = 0;
  for (const member of groupMembers(pgid))
    if (signalVerified(member, 'SIGKILL', { group: false }).kind === 'signalled') killed += 1;
  return killed;
}

/** Registers a teardown that ends whatever is left of the group. */
export function reapGroupAtEnd(t: ExecutionContext, pgid: number): void {
  t.teardown(() => {
    killGroupMembers(pgid);
  });
}
