// The sweep of ended attempts' empty job cgroups (docs/decisions/0300): the completion processor
// removes a job's cgroup when it commits the end, but a `keep` job's cgroup is still populated then,
// and a cgroup left by an older version or a crash between the end and its removal has nobody else.
// Every cleanup period (the first one at start-up) one page of the subtree's directories is looked
// at; a directory is removed only when its attempt is in this runner's store, ended, and its
// handle's cgroup id is that directory's (found by id: a name re-created by someone else stays).
import { RUN_TERMINAL_STATUSES } from '../contract/index';
import { jobCgroupNames, removeEndedJobCgroup } from '../process/index';
import type { RunStore } from '../store/run-store';

/** Directories one sweep looks at (each one store read): a page, not the whole subtree. */
export const CGROUP_SWEEP_PAGE = 64;

/** `<runId>-a<N>`: the name admission gives an attempt, and so its job cgroup (lib/execution/admission.ts). */
const ATTEMPT_NAME = /^(.+)-a[1-9][0-9]{0,5}$/;

function isEnded(status: string): boolean {
  return (RUN_TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** The ended attempt's handle a directory name belongs to, or null (not ours, not ended, unreadable). */
async function endedHandleOf(runStore: Pick<RunStore, 'getAttempt'>, name: string): Promise<string | null> {
  const runId = ATTEMPT_NAME.exec(name)?.[1];
  if (runId === undefined) return null;
  try {
    const attempt = await runStore.getAttempt(runId, name);
    return attempt !== null && isEnded(attempt.status) ? attempt.handle : null;
  } catch {
    return null; // a name the store refuses as an id is no attempt of this store
  }
}

/** A sweep that walks the subtree a page at a time, wrapping around at its end. */
export class JobCgroupSweep {
  readonly #runStore: Pick<RunStore, 'getAttempt'>;
  readonly #page: number;
  #after: string | null = null;

  constructor(runStore: Pick<RunStore, 'getAttempt'>, page = CGROUP_SWEEP_PAGE) {
    this.#runStore = runStore;
    this.#page = page;
  }

  /** One page; how many empty job cgroups of ended attempts were removed. */
  async sweepPage(): Promise<number> {
    const { names } = jobCgroupNames(this.#after, this.#page);
    this.#after = names.length < this.#page ? null : (names[names.length - 1] ?? null);
    let removed = 0;
    for (const name of names) {
      const handle = await endedHandleOf(this.#runStore, name);
      if (handle !== null && removeEndedJobCgroup(handle)) removed += 1;
    }
    return removed;
  }
}
