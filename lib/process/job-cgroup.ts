// Where jobs' cgroups live and how a contained job is stopped (docs/decisions/0180): the runner's
// cgroup v2 subtree (found, or named by --cgroup / PIDFENCE_CGROUP), one child cgroup per attempt,
// and the stop that reaches every member: freeze, TERM each proved member, thaw, the grace,
// cgroup.kill, `populated 0` by notification. Without a usable subtree: group containment.
import {
  accessSync,
  constants as fsConstants,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statfsSync,
  statSync,
} from 'node:fs';
import path from 'node:path';

import { PidfenceError } from '../base/errors';
import { monotonicNow, secondsSince } from '../base/time';
import {
  cgroupFreeze,
  cgroupKill,
  cgroupLearnName,
  cgroupRead,
  cgroupRemove,
  cgroupSignalMembers,
  cgroupWaitEmpty,
  validateCgroupSubtree,
  type JobCgroupRef,
} from '../native/index';
import { parseHandle, validateHandleCgroupSubtree, type DurableProcessHandle } from './durable-handle';

/** Names the subtree (an absolute directory in the cgroup2 mount), or `off` for group containment. */
export const CGROUP_ENV = 'PIDFENCE_CGROUP';
export const CGROUP_OFF = 'off';
/** The default subtree's name under the runner's own cgroup. */
const DEFAULT_SUBTREE_NAME = 'pidfence';

export type Containment = 'cgroup' | 'group';

/** The cgroup2 mount point from /proc/self/mountinfo (field 5; the type follows the ' - '). */
export function cgroup2Mount(): string | null {
  let text: string;
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (right?.startsWith('cgroup2 ')) return left?.split(' ')[4] ?? null;
  }
  return null;
}

/** This process's cgroup v2 path ("0::<path>" in /proc/self/cgroup). */
function ownCgroupPath(): string | null {
  try {
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((entry) => entry.startsWith('0::'));
    return line === undefined ? null : line.slice(3);
  } catch {
    return null;
  }
}

function writableDirectory(directory: string): boolean {
  try {
    mkdirSync(directory, { recursive: true });
    accessSync(directory, fsConstants.W_OK);
    return statSync(directory).isDirectory() && statSync(path.join(directory, 'cgroup.procs')).isFile();
  } catch {
    return false;
  }
}

/** statfs f_type of a cgroup v2 filesystem (linux/magic.h CGROUP2_SUPER_MAGIC). */
const CGROUP2_SUPER_MAGIC = 0x63677270;

/** Every job handle names its cgroup's subtree (docs/decisions/0304): one it cannot name is not used. */
function recordable(subtree: string): boolean {
  try {
    validateHandleCgroupSubtree(subtree);
    return true;
  } catch {
    return false;
  }
}

function namedSubtreeRefused(message: string, code: string): PidfenceError {
  return new PidfenceError(
    `${message}; name a delegated cgroup2 directory with --cgroup or ${CGROUP_ENV}, or '${CGROUP_OFF}' for group containment.`,
    code,
  );
}

/**
 * A subtree named by --cgroup or PIDFENCE_CGROUP (docs/decisions/0301): an absolute, existing,
 * writable directory of a cgroup v2 filesystem. Each refusal has its own code; nothing is created.
 */
export function validateNamedSubtree(named: string): string {
  if (!named.startsWith('/'))
    throw namedSubtreeRefused(`the cgroup subtree '${named}' is a relative path`, 'ERR_PIDFENCE_INVALID_CGROUP');
  const subtree = validateCgroupSubtree(named);
  if (!recordable(subtree))
    throw namedSubtreeRefused(
      `the cgroup subtree path is longer than a job's handle can name, or holds a character other than printable ASCII (or " or \\)`,
      'ERR_PIDFENCE_INVALID_CGROUP',
    );
  let isDirectory = false;
  try {
    isDirectory = statSync(subtree).isDirectory();
  } catch {
    // missing: said below
  }
  if (!isDirectory)
    throw namedSubtreeRefused(
      `the cgroup subtree ${subtree} does not exist (mkdir it first)`,
      'ERR_PIDFENCE_CGROUP_MISSING',
    );
  if (statfsSync(subtree).type !== CGROUP2_SUPER_MAGIC)
    throw namedSubtreeRefused(
      `${subtree} is not in a cgroup v2 filesystem (cgroup2 is mounted at ${cgroup2Mount() ?? 'no mount point'})`,
      'ERR_PIDFENCE_CGROUP_NOT_CGROUP2',
    );
  if (!writableDirectory(subtree))
    throw namedSubtreeRefused(`the cgroup subtree ${subtree} is not writable`, 'ERR_PIDFENCE_CGROUP_UNAVAILABLE');
  return subtree;
}

let chosen: string | null | undefined;

/**
 * The subtree this process creates and finds job cgroups in, or null (group containment). Named:
 * `setting` (the --cgroup option, which wins) or PIDFENCE_CGROUP, a directory that must be usable,
 * or `off`. Found: as root with cgroup2 mounted, `pidfence` under this process's own cgroup, a
 * child that holds no process itself (cgroup v2's no-internal-process rule then holds for any
 * controllers). The first answer is kept for the life of the process: later calls without a
 * setting get it, so a --cgroup given once also names the subtree a stop looks in.
 */
export function resolveCgroupSubtree(setting?: string): string | null {
  if (setting === undefined && chosen !== undefined) return chosen;
  const named = setting ?? process.env[CGROUP_ENV];
  if (named === CGROUP_OFF) return (chosen = null);
  if (named !== undefined && named !== '') return (chosen = validateNamedSubtree(named));
  const mount = cgroup2Mount();
  const own = ownCgroupPath();
  if (process.getuid?.() !== 0 || mount === null || own === null) return (chosen = null);
  const subtree = path.join(mount, own, DEFAULT_SUBTREE_NAME);
  return (chosen = recordable(subtree) && writableDirectory(subtree) ? subtree : null);
}

/** Forget the resolved subtree (tests that switch PIDFENCE_CGROUP in one process). */
export function forgetCgroupSubtree(): void {
  chosen = undefined;
}

/** What a whole-tree stop writes in a job's cgroup: freeze (Linux 5.2) and kill (Linux 5.14). */
const WHOLE_TREE_STOP_FILES = ['cgroup.freeze', 'cgroup.kill'] as const;

function wholeTreeStopPossible(directory: string): boolean {
  return WHOLE_TREE_STOP_FILES.every((name) => {
    try {
      return statSync(path.join(directory, name)).isFile();
    } catch {
      return false;
    }
  });
}

/**
 * Creates the attempt's cgroup; its id (the directory's inode) goes into the durable handle. A cgroup
 * a whole-tree stop cannot be written to (an older kernel) is removed again and refused: the caller
 * falls back to group containment, stated on the run (docs/decisions/0305).
 */
export function createJobCgroup(subtree: string, attemptId: string): { path: string; ref: JobCgroupRef } {
  const directory = path.join(subtree, attemptId);
  mkdirSync(directory);
  if (!wholeTreeStopPossible(directory)) {
    discardJobCgroup(directory);
    throw new PidfenceError(
      `the job cgroups of ${subtree} have no ${WHOLE_TREE_STOP_FILES.join(' or ')} (Linux before 5.14); jobs run in group containment there.`,
      'ERR_PIDFENCE_CGROUP_UNAVAILABLE',
    );
  }
  const ref = { subtree, id: statSync(directory, { bigint: true }).ino.toString() };
  // Its stops and reads then find it without listing every sibling (docs/decisions/0443); best effort.
  cgroupLearnName(ref, attemptId);
  return { path: directory, ref };
}

/** Removes a job cgroup the launcher never used (its start failed); an error leaves it for later. */
export function discardJobCgroup(directory: string): void {
  try {
    rmdirSync(directory);
  } catch {
    // populated or gone: the launcher or a stop removes it
  }
}

export type CgroupStopOutcome =
  /** `termSeconds`: freeze, TERM to each member, thaw, together (0 when nothing was populated). */
  | { readonly kind: 'empty'; readonly escalated: boolean; readonly reached: number; readonly termSeconds: number }
  /** Still populated after KILL (an uninterruptible process): reported, never called ended. */
  | { readonly kind: 'still_populated'; readonly reached: number }
  | { readonly kind: 'gone' }
  | { readonly kind: 'unsupported' };

function stepFailed(errno: string): PidfenceError {
  return new PidfenceError(
    `a cgroup step failed with ${errno}; the dispatch will be retried.`,
    'ERR_PIDFENCE_SIGNAL_FAILED',
    { errno },
  );
}

/**
 * Freeze, TERM (then CONT) every member proved by its pidfd, thaw: members cannot fork or exit in
 * between, so each PID read from cgroup.procs is its process's. Returns how many were reached.
 */
function terminateFrozen(ref: JobCgroupRef): number | 'gone' | 'unsupported' {
  const frozen = cgroupFreeze(ref, true);
  if (frozen.kind === 'gone') return 'gone';
  if (frozen.kind === 'error') throw stepFailed(frozen.errno);
  try {
    const term = cgroupSignalMembers(ref, 'SIGTERM');
    // A freeze takes effect asynchronously: a member TERMed before it froze may end at once, its
    // launcher then removes the emptied cgroup, and the rest of the call finds it gone. What was
    // signalled was proved a member first, so the cgroup went away because its members ended.
    if (term.kind === 'gone' && term.signalled > 0) return term.signalled;
    if (term.kind === 'gone' || term.kind === 'unsupported') return term.kind;
    if (term.kind === 'error') throw stepFailed(term.errno);
    cgroupSignalMembers(ref, 'SIGCONT'); // a stopped member would never see TERM; thawing does not resume SIGSTOP
    return term.signalled;
  } finally {
    if (frozen.kind === 'ok') cgroupFreeze(ref, false);
  }
}

/** The whole-tree stop of a contained job (docs/decisions/0180). */
export async function stopJobCgroup(
  ref: JobCgroupRef,
  graceMs: number,
  killConfirmMs: number,
): Promise<CgroupStopOutcome> {
  const before = cgroupRead(ref);
  if (before.kind === 'gone' || before.kind === 'unsupported') return { kind: before.kind };
  if (before.kind === 'error') throw stepFailed(before.errno);
  if (before.kind !== 'ok') return { kind: 'unsupported' };
  if (!before.populated) return { kind: 'empty', escalated: false, reached: 0, termSeconds: 0 };
  const started = monotonicNow();
  const reached = terminateFrozen(ref);
  if (reached === 'gone' || reached === 'unsupported') return { kind: reached };
  const termSeconds = secondsSince(started);
  if ((await cgroupWaitEmpty(ref, graceMs)) === 'empty')
    return { kind: 'empty', escalated: false, reached, termSeconds };
  const kill = cgroupKill(ref);
  if (kill.kind === 'gone') return { kind: 'empty', escalated: false, reached, termSeconds };
  if (kill.kind === 'unsupported') return { kind: 'unsupported' };
  if (kill.kind === 'error') throw stepFailed(kill.errno);
  const after = await cgroupWaitEmpty(ref, killConfirmMs);
  return after === 'empty'
    ? { kind: 'empty', escalated: true, reached, termSeconds }
    : { kind: 'still_populated', reached };
}

/** Is a member of the job's cgroup alive? null: the cgroup cannot be read (no proof either way). */
export function jobCgroupPopulated(ref: JobCgroupRef): boolean | 'gone' | null {
  const now = cgroupRead(ref);
  if (now.kind === 'gone') return 'gone';
  return 'populated' in now ? now.populated : null;
}

/**
 * Removes an ended attempt's job cgroup if it is still there and empty (docs/decisions/0300): found
 * by the id its handle carries, never by name, so a directory re-created under the name is left
 * alone; a populated cgroup (a `keep` job's leftovers) refuses the rmdir and stays. True: removed.
 */
export function removeEndedJobCgroup(handle: string): boolean {
  let ref: JobCgroupRef | null;
  try {
    ref = jobCgroupOfHandle(parseHandle(handle));
  } catch {
    return false; // unparsable, or this process's subtree cannot be used: no job cgroup of ours
  }
  return ref !== null && cgroupRemove(ref).kind === 'ok';
}

/**
 * Where a contained job's cgroup is: the subtree its handle names (docs/decisions/0304), whoever
 * looks; a handle written before it named none is looked for in this process's own subtree (which
 * may throw for an unusable PIDFENCE_CGROUP). Null: not contained, or nowhere to look.
 */
export function jobCgroupOfHandle(handle: DurableProcessHandle): JobCgroupRef | null {
  if (handle.cgroupId === undefined) return null;
  const subtree = handle.cgroupSubtree ?? resolveCgroupSubtree();
  return subtree === null ? null : { subtree, id: handle.cgroupId };
}

/**
 * Up to `limit` job cgroup names of the subtree after `after` (sorted), for the sweep of ended
 * attempts' cgroups (docs/decisions/0300); [] without a subtree.
 */
export function jobCgroupNames(after: string | null, limit: number): { subtree: string | null; names: string[] } {
  let subtree: string | null;
  try {
    subtree = resolveCgroupSubtree();
  } catch {
    return { subtree: null, names: [] };
  }
  if (subtree === null) return { subtree, names: [] };
  let names: string[];
  try {
    names = readdirSync(subtree, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
  } catch {
    return { subtree, names: [] };
  }
  names.sort();
  return { subtree, names: names.filter((name) => after === null || name > after).slice(0, limit) };
}
