// Is anything of a job's process group left? (docs/decisions/0071) The launcher leads the group;
// its death is not the job's end. A held pidfd answers exactly. Without one, the kernel's rule that
// a PID number stays reserved while any process uses it as a group id gives one more exact answer:
// the launcher is gone and nothing uses its number as a group id. Another boot id is a third. A
// group with members and no hold stays unproven: it may be another group that reused the number,
// so nothing is concluded and nothing is signalled.

import { signalVerified } from '../native/index';
import { handleExpectedIdentity, parseHandle, type DurableProcessHandle } from './durable-handle';
import type { HeldGroups } from './held-groups';
import { jobCgroupOfHandle, jobCgroupPopulated } from './job-cgroup';
import { pidNamespaceMatches } from './pid-namespace';
import { scanProcesses } from './proc-scan';

export type GroupLiveness = 'alive' | 'gone' | 'unproven';

/**
 * Whether any live process may use `pgid` as its group id now (one pass over /proc; only when the
 * leader is gone). Zombies are dead and do not count; a process whose stat cannot be read counts
 * as a member: doubt never proves a group empty.
 */
function groupMayHaveLiveMembers(pgid: number): boolean {
  for (const { stat } of scanProcesses()) {
    if (stat === 'unreadable') return true;
    if (stat !== null && stat.pgid === pgid && stat.state !== 'Z') return true;
  }
  return false;
}

/** Its cgroup is looked for where its handle says (docs/decisions/0304). */
function containedTreeLives(handle: DurableProcessHandle): boolean {
  const ref = jobCgroupOfHandle(handle);
  return ref !== null && jobCgroupPopulated(ref) === true;
}

export function groupLiveness(handle: string, held: HeldGroups): GroupLiveness {
  let expected;
  try {
    const parsed = parseHandle(handle);
    // Another PID namespace: its numbers prove nothing here (docs/decisions/0155).
    if (!pidNamespaceMatches(parsed.pidNs)) return 'unproven';
    expected = handleExpectedIdentity(parsed);
    // A contained job lives while its cgroup is populated, whatever its launcher's group says
    // (docs/decisions/0180); an empty or removed cgroup leaves the launcher's group to decide.
    if (containedTreeLives(parsed)) return 'alive';
  } catch {
    return 'unproven';
  }
  const probe = held.probe(handle);
  if (probe !== null) {
    if (probe.kind === 'already_exited') return 'gone';
    if (probe.kind !== 'signalled') return 'unproven';
    // The held group still answers; if its leader is gone, what answers may be only the leader's
    // zombie, not yet reaped by its parent: that is no live member.
    const leaderGone = signalVerified(expected, 0, { group: false }).kind === 'already_exited';
    return leaderGone && !groupMayHaveLiveMembers(expected.pid) ? 'gone' : 'alive';
  }
  const leader = signalVerified(expected, 0, { group: false });
  switch (leader.kind) {
    case 'signalled':
      // Proved alive now: hold the group from here on, so its members stay reachable.
      held.hold(handle);
      return 'alive';
    case 'identity_mismatch':
      // Another boot: no process of the old one is left. Another process at the number would also
      // prove the old group empty, but only if the handle is genuine: stay on the safe side.
      return leader.reason === 'boot_id' ? 'gone' : 'unproven';
    case 'already_exited':
      return groupMayHaveLiveMembers(expected.pid) ? 'unproven' : 'gone';
    default:
      return 'unproven';
  }
}
