// A job's cgroup, validated and typed (docs/decisions/0180): every call names the cgroup by the
// subtree it lives in and its id (the directory's inode, PIDFD_GET_INFO's cgroupid); the addon
// finds it again by that id each time, so a cgroup re-created under the same name is never touched.
import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import type { CgroupMemberProof, RawCgroupResult } from './addon-contract';
import { getAddon } from './loader';
import { validateCgroupId, validateSignal, validateTimeoutMs } from './validate';

/** The cgroup v2 path limit we accept for a subtree (PATH_MAX less room for the job's name). */
export const CGROUP_SUBTREE_MAX_BYTES = 3_800;

export interface JobCgroupRef {
  /** Absolute path of the directory the job's cgroup was created in. */
  readonly subtree: string;
  /** The job cgroup's id: its directory's inode. */
  readonly id: string;
}

export type CgroupStep =
  | { readonly kind: 'ok' }
  /** No cgroup with this id under the subtree: removed (so empty then), or never there. */
  | { readonly kind: 'gone' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'unsupported' }
  | { readonly kind: 'error'; readonly errno: string };

export type CgroupRead =
  { readonly kind: 'ok'; readonly populated: boolean; readonly frozen: boolean } | Exclude<CgroupStep, { kind: 'ok' }>;

export function validateCgroupSubtree(value: unknown): string {
  if (typeof value !== 'string')
    throw new PidfenceTypeError('a cgroup subtree is an absolute path (a string).', 'ERR_PIDFENCE_INVALID_CGROUP');
  if (!value.startsWith('/') || value.includes('\0') || Buffer.byteLength(value) > CGROUP_SUBTREE_MAX_BYTES) {
    throw new PidfenceRangeError(
      `a cgroup subtree is an absolute path of at most ${CGROUP_SUBTREE_MAX_BYTES} bytes without NUL; give the directory in the cgroup2 mount.`,
      'ERR_PIDFENCE_INVALID_CGROUP',
    );
  }
  return value;
}

function checked(ref: JobCgroupRef): JobCgroupRef {
  return { subtree: validateCgroupSubtree(ref.subtree), id: validateCgroupId(ref.id) };
}

function step(raw: RawCgroupResult): CgroupStep {
  return raw.kind === 'error' ? { kind: 'error', errno: raw.errno } : { kind: raw.kind };
}

const NO_ADDON: CgroupStep = { kind: 'unsupported' };

export function cgroupRead(ref: JobCgroupRef): CgroupRead {
  const { subtree, id } = checked(ref);
  const addon = getAddon();
  if (!addon) return { kind: 'unsupported' };
  const raw = addon.cgroupRead(subtree, id);
  if ('populated' in raw) return { kind: 'ok', populated: raw.populated, frozen: raw.frozen };
  return step(raw) as CgroupRead;
}

export function cgroupFreeze(ref: JobCgroupRef, frozen: boolean): CgroupStep {
  const { subtree, id } = checked(ref);
  const addon = getAddon();
  return addon ? step(addon.cgroupFreeze(subtree, id, frozen === true)) : NO_ADDON;
}

/**
 * Signals each member proved, through its own pidfd, to be in the cgroup; counts the processes
 * reached. `proof: 'listing'` skips PIDFD_GET_INFO (the proof used where a kernel or an emulator
 * lacks it; docs/decisions/0180), so both proofs can be exercised on one machine.
 */
export function cgroupSignalMembers(
  ref: JobCgroupRef,
  signal: string | number,
  options: { readonly proof?: 'auto' | 'listing' } = {},
): CgroupStep & { readonly signalled: number; readonly proof: CgroupMemberProof } {
  const { subtree, id } = checked(ref);
  const signo = validateSignal(signal);
  if (signo === 0) {
    throw new PidfenceRangeError('cgroupSignalMembers needs a real signal, not 0.', 'ERR_PIDFENCE_INVALID_SIGNAL');
  }
  const proof = validateMemberProof(options);
  const addon = getAddon();
  if (!addon) return { ...NO_ADDON, signalled: 0, proof: 'listing' };
  const raw = addon.cgroupSignalMembers(subtree, id, signo, proof);
  return { ...step(raw), signalled: raw.signalled, proof: raw.proof };
}

function validateMemberProof(options: unknown): 'auto' | 'listing' {
  const known = typeof options === 'object' && options !== null && Object.keys(options).every((key) => key === 'proof');
  const proof = known ? ((options as { proof?: unknown }).proof ?? 'auto') : null;
  if (proof !== 'auto' && proof !== 'listing') {
    throw new PidfenceTypeError(
      "cgroupSignalMembers options are { proof: 'auto' | 'listing' }; leave them out for the strongest proof.",
      'ERR_PIDFENCE_INVALID_OPTIONS',
    );
  }
  return proof;
}

export function cgroupKill(ref: JobCgroupRef): CgroupStep {
  const { subtree, id } = checked(ref);
  const addon = getAddon();
  return addon ? step(addon.cgroupKill(subtree, id)) : NO_ADDON;
}

export function cgroupRemove(ref: JobCgroupRef): CgroupStep {
  const { subtree, id } = checked(ref);
  const addon = getAddon();
  return addon ? step(addon.cgroupRemove(subtree, id)) : NO_ADDON;
}

/** A job cgroup's own name: one path component, as `mkdir` made it in the subtree. */
function validateCgroupName(value: unknown): string {
  if (typeof value !== 'string')
    throw new PidfenceTypeError('a job cgroup name is a string.', 'ERR_PIDFENCE_INVALID_CGROUP');
  if (
    value === '' ||
    value === '.' ||
    value === '..' ||
    value.includes('/') ||
    value.includes('\0') ||
    Buffer.byteLength(value) > 254
  ) {
    throw new PidfenceRangeError(
      'a job cgroup name is one path component of 1-254 bytes (no "/", NUL, "." or ".."); give the name it was made under.',
      'ERR_PIDFENCE_INVALID_CGROUP',
    );
  }
  return value;
}

/**
 * Tells the addon the name a job cgroup was made under (docs/decisions/0443), proved there by the id:
 * its later finds need not list the subtree. `gone`: no directory of that name has that id.
 */
export function cgroupLearnName(ref: JobCgroupRef, name: string): CgroupStep {
  const { subtree, id } = checked(ref);
  const own = validateCgroupName(name);
  const addon = getAddon();
  return addon ? step(addon.cgroupLearnName(subtree, id, own)) : NO_ADDON;
}

export type CgroupWaitOutcome = 'empty' | 'timeout' | Exclude<CgroupStep, { kind: 'ok' | 'gone' | 'busy' }>;

/**
 * The kernel sends at most one cgroup.events notification per 10 ms (one jiffy at HZ=100): a later
 * change is held back, and the held-back notification is dropped when the cgroup is removed first
 * (docs/decisions/0395). The file is read again this long after the wait began and after each
 * notification, which covers every change that could have been held back.
 */
export const CGROUP_NOTIFY_RELOOK_MS = 50;

/**
 * Resolves 'empty' once cgroup.events says `populated 0` (or the cgroup was removed, which needs it
 * empty), told by inotify on cgroup.events, not by polling: the file is read on each notification,
 * and once more CGROUP_NOTIFY_RELOOK_MS after the start and after each notification; 'timeout'
 * after timeoutMs, only when a last look still finds it populated.
 */
export function cgroupWaitEmpty(ref: JobCgroupRef, timeoutMs: number): Promise<CgroupWaitOutcome> {
  const { subtree, id } = checked(ref);
  const timeout = validateTimeoutMs(timeoutMs);
  const addon = getAddon();
  if (!addon) return Promise.resolve({ kind: 'unsupported' });
  return new Promise((resolve) => {
    let watchId = 0;
    let timer: NodeJS.Timeout | undefined = undefined;
    let relook: NodeJS.Timeout | undefined = undefined;
    const finish = (outcome: CgroupWaitOutcome): void => {
      clearTimeout(timer);
      clearTimeout(relook);
      if (watchId !== 0) addon.exitWatchCancel(watchId);
      watchId = -1;
      resolve(outcome);
    };
    const look = (): void => {
      if (watchId === -1) return;
      const now = cgroupRead({ subtree, id });
      if (now.kind === 'gone' || (now.kind === 'ok' && !now.populated)) finish('empty');
      else if (now.kind !== 'ok') finish(now as CgroupWaitOutcome);
    };
    const lookNowAndLater = (): void => {
      look();
      if (watchId === -1) return;
      clearTimeout(relook);
      relook = setTimeout(look, CGROUP_NOTIFY_RELOOK_MS);
    };
    const started = addon.cgroupWatchStart(subtree, id, lookNowAndLater);
    if (started.kind !== 'watching') {
      resolve(started.kind === 'gone' ? 'empty' : (step(started as RawCgroupResult) as CgroupWaitOutcome));
      return;
    }
    watchId = started.id;
    // A loop stalled past the timeout runs this timer before the notification it could not read yet:
    // the cgroup is looked at once more, so a job that ended in time is not called alive (docs/decisions/0447).
    timer = setTimeout(() => {
      look();
      if (watchId !== -1) finish('timeout');
    }, timeout);
    lookNowAndLater(); // a change before the watch existed is seen here
  });
}
