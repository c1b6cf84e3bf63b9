// pidfence/native: the kernel-facing core (design/dispatch §2.3), validated and typed. Identity proof
// and signal share one pidfd inside one synchronous native call; see docs/decisions/0002.
import { PidfenceError, isPidfenceInputError } from '../base/errors';
import type { RawMismatchReason, RawSignalMode } from './addon-contract';
import { getAddon, requireAddon, addonStatus } from './loader';
import { decodeVerdict } from './verdict';
import {
  validateExpectedIdentity,
  validatePid,
  validateSignal,
  validateSignalOptions,
  validateTimeoutMs,
  type ExpectedIdentity,
  type SignalOptions,
} from './validate';

export { LAUNCHER_BINARY_NAME, launcherCandidates, launcherPath } from './launcher-binary';
export { addonStatus, ADDON_PATH_ENV, NO_ADDON_ENV, type AddonSource, type AddonStatus } from './loader';
export { PID_MAX, WAIT_EXIT_MAX_MS, type ExpectedIdentity, type SignalOptions } from './validate';
export { bootClockMs, bootNow, monotonicMs, type BootReading } from './boot-clock';
export {
  CGROUP_SUBTREE_MAX_BYTES,
  cgroupFreeze,
  cgroupKill,
  cgroupRead,
  cgroupLearnName,
  cgroupRemove,
  cgroupSignalMembers,
  cgroupWaitEmpty,
  validateCgroupSubtree,
  type CgroupRead,
  type CgroupStep,
  type CgroupWaitOutcome,
  type JobCgroupRef,
} from './job-cgroup';

/** Set to `1` to force the `pgid-after-pidfd-check` group path (to test it on a 6.9+ kernel). */
export const FORCE_GROUP_FALLBACK_ENV = 'PIDFENCE_FORCE_GROUP_FALLBACK';

export interface ProcessStat {
  readonly pid: number;
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
  readonly sid: number;
  /** Field 22 of /proc/<pid>/stat, exact, as a decimal string. */
  readonly startTicks: string;
}

export interface ProcessIdentity {
  readonly pid: number;
  readonly bootId: string;
  readonly startTicks: string;
  readonly pgid: number;
  /** The pidfs inode (Linux 6.9+): unique per process for the whole boot. */
  readonly pidfsIno?: string;
}

export type GroupSignalMode = 'pidfd-process-group' | 'pgid-after-pidfd-check' | 'unsupported';

export interface Capabilities {
  readonly pidfdOpen: boolean;
  readonly pidfdSendSignal: boolean;
  readonly processGroupFlag: boolean;
  readonly pidfdGetInfo: boolean;
  readonly pidfsIdentity: boolean;
  readonly groupSignalMode: GroupSignalMode;
}

export type MismatchReason = RawMismatchReason;
export type SignalMode = RawSignalMode;

export type SignalOutcome =
  | { readonly kind: 'signalled'; readonly mode: SignalMode }
  | { readonly kind: 'already_exited' }
  | { readonly kind: 'identity_mismatch'; readonly reason: MismatchReason }
  | { readonly kind: 'unsupported'; readonly reason: string }
  | { readonly kind: 'invalid'; readonly code: string; readonly message: string }
  | { readonly kind: 'error'; readonly errno: string };

export type WaitExitOutcome =
  { readonly kind: 'exited' } | { readonly kind: 'timeout' } | Exclude<SignalOutcome, { kind: 'signalled' }>;

function forcedFallback(): boolean {
  return process.env[FORCE_GROUP_FALLBACK_ENV] === '1';
}

function syscallError(what: string, errno: string): PidfenceError {
  return new PidfenceError(
    `${what} failed with ${errno}; check that /proc is mounted and readable.`,
    'ERR_PIDFENCE_SYSCALL',
    { errno },
  );
}

function unsupportedReason(): string {
  const status = addonStatus();
  return status.loaded ? 'the kernel lacks pidfd_open/pidfd_send_signal' : status.reason;
}

/** Reads /proc/<pid>/stat with one read(); null when the process does not exist. */
export function readProcessStat(pid: number): ProcessStat | null {
  const checkedPid = validatePid(pid);
  const result = requireAddon().readProcessStat(checkedPid);
  if (result.kind === 'gone') return null;
  if (result.kind === 'error') throw syscallError('reading /proc/<pid>/stat', result.errno);
  return {
    pid: result.pid,
    state: result.state,
    ppid: result.ppid,
    pgid: result.pgid,
    sid: result.sid,
    startTicks: result.startTicks,
  };
}

/** The boot id UUID (read once by the addon, then cached). */
export function bootId(): string {
  const result = requireAddon().bootId();
  if (result.kind === 'error') throw syscallError('reading the boot id', result.errno);
  return result.bootId;
}

/**
 * The identity of a live process, taken from one pidfd: opened first, then the stat read and
 * proved to belong to it. null when the process does not exist or has already exited.
 */
export function captureIdentity(pid: number): ProcessIdentity | null {
  const checkedPid = validatePid(pid);
  const addon = getAddon();
  if (!addon) {
    throw new PidfenceError(`cannot capture a process identity: ${unsupportedReason()}.`, 'ERR_PIDFENCE_UNSUPPORTED');
  }
  const result = addon.captureIdentity(checkedPid);
  switch (result.kind) {
    case 'verified': {
      const { pid: capturedPid, bootId: capturedBootId, startTicks, pgid, pidfsIno } = result;
      // Frozen: an identity is a fact about one process; frozen ones are validated only once.
      return Object.freeze(
        pidfsIno === undefined
          ? { pid: capturedPid, bootId: capturedBootId, startTicks, pgid }
          : { pid: capturedPid, bootId: capturedBootId, startTicks, pgid, pidfsIno },
      );
    }
    case 'already_exited':
      return null;
    case 'unsupported':
      throw new PidfenceError(`cannot capture a process identity: ${unsupportedReason()}.`, 'ERR_PIDFENCE_UNSUPPORTED');
    case 'identity_mismatch':
    case 'error':
      throw syscallError('capturing a process identity', result.kind === 'error' ? result.errno : 'EPROTO');
  }
}

/** What the running kernel offers, probed once (EINVAL/ENOSYS answers, never version strings). */
export function capabilities(): Capabilities {
  const addon = getAddon();
  if (!addon) {
    return {
      pidfdOpen: false,
      pidfdSendSignal: false,
      processGroupFlag: false,
      pidfdGetInfo: false,
      pidfsIdentity: false,
      groupSignalMode: 'unsupported',
    };
  }
  const raw = addon.capabilities();
  const groupSignalMode: GroupSignalMode = !(raw.pidfdOpen && raw.pidfdSendSignal)
    ? 'unsupported'
    : raw.processGroupFlag && !forcedFallback()
      ? 'pidfd-process-group'
      : 'pgid-after-pidfd-check';
  return { ...raw, groupSignalMode };
}

/** The identity itself says this process does not lead a group: nothing to prove for a group. */
function notGroupLeader(identity: ExpectedIdentity): boolean {
  return identity.pgid !== undefined && identity.pgid !== identity.pid;
}

const NOT_GROUP_LEADER = { kind: 'identity_mismatch', reason: 'not_group_leader' } as const;

function invalidOutcome(error: unknown): SignalOutcome {
  if (isPidfenceInputError(error)) return { kind: 'invalid', code: error.code, message: error.message };
  throw error;
}

/**
 * Proves `expected` and signals it through the same pidfd, in one synchronous native call.
 * A malformed `expected` answers `invalid` (it is data, often from storage); a bad signal or
 * options object is a programming error and throws.
 */
export function signalVerified(
  expected: ExpectedIdentity,
  signal: string | number,
  options?: SignalOptions,
): SignalOutcome {
  const signo = validateSignal(signal);
  const { group, forceGroupFallback } = validateSignalOptions(options);
  let identity: ExpectedIdentity;
  try {
    identity = validateExpectedIdentity(expected);
  } catch (error) {
    return invalidOutcome(error);
  }
  if (group && notGroupLeader(identity)) return NOT_GROUP_LEADER;
  const addon = getAddon();
  if (!addon) return { kind: 'unsupported', reason: unsupportedReason() };
  const verdict = decodeVerdict(
    addon.signalVerified(
      identity.pid,
      identity.bootId,
      identity.startTicks,
      identity.pidfsIno ?? '',
      signo,
      group,
      forceGroupFallback || forcedFallback(),
    ),
  );
  return verdict.kind === 'unsupported' ? { kind: 'unsupported', reason: unsupportedReason() } : verdict;
}

/**
 * Resolves when the proved process exits (its pidfd becomes readable on the event loop: no
 * polling, no thread) or after `timeoutMs`. A process that cannot be proved answers at once.
 */
export function waitExit(expected: ExpectedIdentity, timeoutMs: number): Promise<WaitExitOutcome> {
  const timeout = validateTimeoutMs(timeoutMs);
  let identity: ExpectedIdentity;
  try {
    identity = validateExpectedIdentity(expected);
  } catch (error) {
    return Promise.resolve(invalidOutcome(error) as WaitExitOutcome);
  }
  const addon = getAddon();
  if (!addon) return Promise.resolve({ kind: 'unsupported', reason: unsupportedReason() });
  return new Promise<WaitExitOutcome>((resolve) => {
    let timer: NodeJS.Timeout | undefined = undefined;
    const started = addon.exitWatchStart(
      identity.pid,
      identity.bootId,
      identity.startTicks,
      identity.pidfsIno ?? '',
      (status) => {
        if (timer) clearTimeout(timer);
        resolve(status === 'exited' ? { kind: 'exited' } : { kind: 'error', errno: 'EIO' });
      },
      false,
    );
    if (started.kind !== 'watching') {
      resolve(started.kind === 'unsupported' ? { kind: 'unsupported', reason: unsupportedReason() } : started);
      return;
    }
    timer = setTimeout(() => {
      if (addon.exitWatchCancel(started.id)) resolve({ kind: 'timeout' });
    }, timeout);
  });
}

export type GroupSignalOutcome =
  | { readonly kind: 'signalled'; readonly mode: 'pidfd-process-group' }
  /** The group has no members left. */
  | { readonly kind: 'already_exited' }
  | { readonly kind: 'unsupported'; readonly reason: string }
  | { readonly kind: 'error'; readonly errno: string };

/**
 * A verified pidfd held open (the owner must call release()). It watches the leader's exit and
 * can signal the leader's group for as long as it is held — also after the leader exited, when
 * members may live on: the pidfd pins the leader's kernel pid, so the group it names can never
 * be another group that reused the number.
 */
export interface GroupHold {
  /** Resolves when the leader has exited. */
  readonly exited: Promise<void>;
  signalGroup(signal: string | number): GroupSignalOutcome;
  release(): void;
}

export type GroupHoldOutcome =
  { readonly kind: 'held'; readonly hold: GroupHold } | Exclude<SignalOutcome, { kind: 'signalled' }>;

/**
 * Proves `expected` (as signalVerified does with `group: true`) and keeps its pidfd as a
 * GroupHold. A process that does not lead its own group answers identity_mismatch
 * (not_group_leader): a hold exists to signal the group the process leads.
 */
export function acquireGroupHold(expected: ExpectedIdentity): GroupHoldOutcome {
  let identity: ExpectedIdentity;
  try {
    identity = validateExpectedIdentity(expected);
  } catch (error) {
    return invalidOutcome(error) as GroupHoldOutcome;
  }
  if (notGroupLeader(identity)) return NOT_GROUP_LEADER;
  const addon = getAddon();
  if (!addon || !addon.capabilities().processGroupFlag || forcedFallback()) {
    return {
      kind: 'unsupported',
      reason: addon ? 'the kernel lacks PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+)' : unsupportedReason(),
    };
  }
  let leaderExited!: () => void;
  const exited = new Promise<void>((resolve) => (leaderExited = resolve));
  const started = addon.exitWatchStart(
    identity.pid,
    identity.bootId,
    identity.startTicks,
    identity.pidfsIno ?? '',
    () => leaderExited(),
    true,
  );
  if (started.kind !== 'watching') {
    return started.kind === 'unsupported' ? { kind: 'unsupported', reason: unsupportedReason() } : started;
  }
  let held = true;
  const hold: GroupHold = {
    exited,
    signalGroup(signal) {
      const signo = validateSignal(signal);
      if (!held)
        throw new PidfenceError('this GroupHold was released; acquire a new one.', 'ERR_PIDFENCE_HOLD_RELEASED');
      const result = addon.exitWatchGroupSignal(started.id, signo);
      switch (result.kind) {
        case 'signalled':
          return { kind: 'signalled', mode: 'pidfd-process-group' };
        case 'already_exited':
          return { kind: 'already_exited' };
        case 'error':
          return { kind: 'error', errno: result.errno };
        default:
          return { kind: 'unsupported', reason: 'the kernel lacks PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+)' };
      }
    },
    release() {
      if (held) addon.exitWatchCancel(started.id);
      held = false;
    },
  };
  return { kind: 'held', hold };
}

export interface BuildInfo {
  /** SHA-256 of binding.gyp and native/*.{cc,h} the binary was built from. */
  readonly sourceDigest: string;
  readonly napiVersion: number;
  readonly arch: string;
}

export function buildInfo(): BuildInfo {
  const { sourceDigest, napiVersion, arch } = requireAddon().buildInfo();
  return { sourceDigest, napiVersion, arch };
}
