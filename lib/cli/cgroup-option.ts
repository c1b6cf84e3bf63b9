// The --cgroup option (docs/decisions/0301, 0304): the cgroup v2 subtree a job's own cgroup is made
// in (`run`), or the one whose empty job cgroups `supervise` sweeps, or `off`. It wins over
// PIDFENCE_CGROUP and is checked before any store is opened, so a bad value changes nothing. A stop
// needs neither: each job's handle names its cgroup's subtree.
import type { Command } from 'commander';

import { PidfenceRangeError } from '../base/errors';
import { CGROUP_ENV, resolveCgroupSubtree } from '../process/index';

export interface CgroupOptions {
  readonly cgroup?: string;
}

const WHAT: Record<'made' | 'swept', string> = {
  made: "the cgroup v2 subtree the job's own cgroup is made in (an existing, writable cgroup2 directory)",
  swept: "the cgroup v2 subtree whose ended jobs' empty cgroups the cleanup sweep removes (the one `run` was given)",
};

export function addCgroupOption(command: Command, role: 'made' | 'swept'): Command {
  return command.option('--cgroup <dir|off>', `${WHAT[role]}, or 'off' for group containment; wins over ${CGROUP_ENV}`);
}

/** Checks and keeps the subtree for this process's life: every stop it makes looks there. */
export function applyCgroupOption(options: CgroupOptions): void {
  resolveCgroupSubtree(options.cgroup);
}

/** On a cluster the worker's environment decides where its jobs' cgroups are (docs/decisions/0301). */
export function refuseCgroupOnCluster(options: CgroupOptions): void {
  if (options.cgroup !== undefined)
    throw new PidfenceRangeError(
      "--cgroup is the worker's on a cluster (its PIDFENCE_CGROUP); drop it here.",
      'ERR_PIDFENCE_USAGE',
    );
}
