// LocalProcessController: stops the exact process group a durable handle names (design/dispatch §2.3-2.5,
// design/execution §3). Every signal is preceded by its own proof; the whole call is bounded.
import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { monotonicNow, secondsSince, settlesWithin } from '../base/time';
import {
  capabilities,
  acquireGroupHold,
  signalVerified,
  waitExit,
  type ExpectedIdentity,
  type GroupHold,
  type GroupSignalOutcome,
  type SignalMode,
  type SignalOutcome,
} from '../native/index';
import { monotonicMs } from '../native/boot-clock';
import { validatePid } from '../native/validate';
import { handleExpectedIdentity, parseHandle, type DurableProcessHandle } from './durable-handle';
import type { HeldGroups } from './held-groups';
import { cgroupRemove, type JobCgroupRef } from '../native/index';
import { jobCgroupOfHandle, jobCgroupPopulated, stopJobCgroup, type CgroupStopOutcome } from './job-cgroup';
import { pidNamespaceMatches } from './pid-namespace';

/**
 * A contained job's cgroup is gone while its launcher lives: the launcher removes it just before it
 * writes its receipt and exits, so it gets this long to do so; otherwise someone else removed it.
 */
const CGROUP_GONE_LAUNCHER_EXIT_MS = 500;

/** The longest TERM grace a caller may ask for (Kubernetes' default is 30 s as well). */
export const GRACE_MS_MAX = 30_000;
/** How long to wait for the exit after SIGKILL before answering (KILL cannot be ignored). */
export const KILL_CONFIRM_MS = 2_000;
/** Room for the proofs and signals themselves (microseconds each) on a slow, loaded device. */
export const CONTROL_OVERHEAD_MS = 500;
/**
 * After the leader exited, how often at most the group is checked for members that outlived it
 * (a group signal 0 through the held pidfd: a few microseconds).
 */
export const MEMBER_CHECK_MS = 25;
/**
 * The first checks come sooner: usually only the leader's zombie is left, gone as soon as its
 * parent's event loop reaps it (for our own children, within a loop turn or two).
 */
const MEMBER_CHECK_STEPS_MS = [0, 1, 2, 5, 10] as const;

export type TerminationResult =
  'termination_requested' | 'already_exited' | 'identity_mismatch' | 'pid_mismatch' | 'unsupported' | 'invalid';

/** Low-sensitivity: no PID, command or handle text. */
export interface TerminationOutcome {
  readonly result: TerminationResult;
  /** SIGKILL followed the grace period. */
  readonly escalated: boolean;
  /** The leader's exit was observed before the call returned. */
  readonly exitObserved: boolean;
}

export interface TerminationRequest {
  /** The PID recorded on the Attempt; must equal the handle's. */
  readonly attemptPid: number;
  readonly handle: string;
  readonly graceMs: number;
}

function outcome(result: TerminationResult, escalated = false, exitObserved = false): TerminationOutcome {
  return { result, escalated, exitObserved };
}

function validateGraceMs(value: unknown): number {
  if (typeof value !== 'number') {
    throw new PidfenceTypeError('graceMs must be a number of milliseconds.', 'ERR_PIDFENCE_INVALID_GRACE');
  }
  if (!Number.isInteger(value) || value < 0 || value > GRACE_MS_MAX) {
    throw new PidfenceRangeError(`graceMs must be an integer from 0 to ${GRACE_MS_MAX}.`, 'ERR_PIDFENCE_INVALID_GRACE');
  }
  return value;
}

/** An unexpected errno (EPERM, EMFILE...) is not a verdict on the process: retry later. */
function signalFailure(result: { readonly errno: string }): PidfenceError {
  return new PidfenceError(
    `signalling failed with ${result.errno}; the dispatch will be retried.`,
    'ERR_PIDFENCE_SIGNAL_FAILED',
    { errno: result.errno },
  );
}

/** True once the group has no members left (the leader counts until its parent reaps it). */
async function groupEmptiedBy(hold: GroupHold, deadline: number): Promise<boolean> {
  for (let check = 0; ; check++) {
    const probe = hold.signalGroup(0);
    if (probe.kind === 'already_exited') return true;
    if (probe.kind === 'error') throw signalFailure(probe);
    const left = deadline - monotonicMs();
    if (left <= 0) return false;
    const step = MEMBER_CHECK_STEPS_MS[check] ?? MEMBER_CHECK_MS;
    await new Promise((resolve) => (step === 0 ? setImmediate(resolve) : setTimeout(resolve, Math.min(step, left))));
  }
}

/** One signal the controller sent after its proof (docs/decisions/0110): never a PID or handle. */
export interface VerifiedSignal {
  readonly signal: 'SIGTERM' | 'SIGCONT' | 'SIGKILL';
  /**
   * How it went out: through the pidfd to the group, the pgid fallback while the pidfd was held, or
   * to each member of the job's cgroup through its own proved pidfd (docs/decisions/0180).
   */
  readonly mode: SignalMode | 'cgroup';
  /** Proof and signal together (one native call), in seconds. */
  readonly seconds: number;
}

export interface LocalProcessControllerOptions {
  /**
   * The groups the runner holds: when a handle's leader (the launcher) is gone but the runner
   * still holds its group, the members that outlived it are stopped through the held pidfd.
   */
  readonly heldGroups?: HeldGroups;
  /** Told of every signal that went out (metrics); a throw from it changes nothing. */
  readonly onSignal?: (signal: VerifiedSignal) => void;
}

export class LocalProcessController {
  /** The platform of the handles this controller understands. */
  readonly platform = 'linux';
  readonly #heldGroups: HeldGroups | null;
  readonly #onSignal: ((signal: VerifiedSignal) => void) | null;

  constructor(options: LocalProcessControllerOptions = {}) {
    this.#heldGroups = options.heldGroups ?? null;
    this.#onSignal = options.onSignal ?? null;
  }

  /** signalVerified to the group, timed and reported when it went out. */
  private verified(expected: ExpectedIdentity, signal: VerifiedSignal['signal']): SignalOutcome {
    const started = monotonicNow();
    const result = signalVerified(expected, signal, { group: true });
    if (result.kind === 'signalled') this.report({ signal, mode: result.mode, seconds: secondsSince(started) });
    return result;
  }

  /** A signal through a held pidfd (the hold is the proof), timed and reported when it went out. */
  private throughHold(hold: GroupHold, signal: VerifiedSignal['signal']): GroupSignalOutcome {
    const started = monotonicNow();
    const result = hold.signalGroup(signal);
    if (result.kind === 'signalled') this.report({ signal, mode: result.mode, seconds: secondsSince(started) });
    return result;
  }

  private report(signal: VerifiedSignal): void {
    try {
      this.#onSignal?.(signal);
    } catch {
      // an observer must not change a stop
    }
  }

  /** The longest a requestTermination call with this grace can take. */
  static boundMs(graceMs: number): number {
    return validateGraceMs(graceMs) + KILL_CONFIRM_MS + CONTROL_OVERHEAD_MS;
  }

  /** The longest any requestTermination call can take; a lease must outlast it. */
  static readonly maxBoundMs = GRACE_MS_MAX + KILL_CONFIRM_MS + CONTROL_OVERHEAD_MS;

  /** The instance form of boundMs, so this class satisfies pidfence/dispatch's TerminationController. */
  boundMs(graceMs: number): number {
    return LocalProcessController.boundMs(graceMs);
  }

  async requestTermination(request: TerminationRequest): Promise<TerminationOutcome> {
    const graceMs = validateGraceMs(request.graceMs);
    let expected: ExpectedIdentity;
    let handle: DurableProcessHandle;
    let attemptPid: number;
    try {
      handle = parseHandle(request.handle);
      expected = handleExpectedIdentity(handle);
      attemptPid = validatePid(request.attemptPid, 'attemptPid');
    } catch (error) {
      if (error instanceof PidfenceTypeError || error instanceof PidfenceRangeError) return outcome('invalid');
      throw error;
    }
    if (capabilities().groupSignalMode === 'unsupported') return outcome('unsupported');
    // Its PID names another process (or none) here: only a caller in its namespace can prove or
    // stop it (docs/decisions/0155).
    if (!pidNamespaceMatches(handle.pidNs)) return outcome('unsupported');
    if (attemptPid !== expected.pid) return outcome('pid_mismatch');
    if (handle.cgroupId !== undefined) return this.stopContained(request.handle, handle, expected, graceMs);
    return this.stopByGroup(request.handle, expected, graceMs);
  }

  /** The group path (docs/decisions/0005, 0071): the launcher's process group, held before TERM. */
  private async stopByGroup(
    handleText: string,
    expected: ExpectedIdentity,
    graceMs: number,
  ): Promise<TerminationOutcome> {
    // The hold is taken before TERM: a leader that dies at once must still leave its group
    // addressable, or members outliving it could not be reached.
    const held = acquireGroupHold(expected);
    if (held.kind === 'held') {
      try {
        return await this.stopGroup(expected, held.hold, graceMs);
      } finally {
        held.hold.release();
      }
    }
    const orphaned = held.kind === 'already_exited' ? (this.#heldGroups?.get(handleText) ?? null) : null;
    if (orphaned !== null) return this.stopOrphanedGroup(orphaned, graceMs);
    if (held.kind !== 'unsupported') return this.firstSignalRefused(held);
    // No PIDFD_SIGNAL_PROCESS_GROUP (Linux < 6.9): only the leader can be watched safely.
    return this.stopLeader(expected, graceMs);
  }

  /**
   * A job born in its own cgroup (docs/decisions/0180): the whole tree is stopped through the
   * cgroup found by its id. A cgroup that cannot be found while the launcher lives on is doubt
   * (removed or re-created by someone else): identity_mismatch, and nothing is signalled.
   */
  private async stopContained(
    handleText: string,
    handle: DurableProcessHandle,
    expected: ExpectedIdentity,
    graceMs: number,
  ): Promise<TerminationOutcome> {
    // Looked for where its handle says (docs/decisions/0304); an older handle: in this caller's subtree.
    const ref = jobCgroupOfHandle(handle);
    if (ref === null) return outcome('unsupported'); // this caller has no cgroup subtree to find it in
    if (jobCgroupPopulated(ref) === 'gone') return this.containedCgroupGone(expected);
    const stopped = await stopJobCgroup(ref, graceMs, KILL_CONFIRM_MS);
    // Empty before anything was signalled: the launcher may not have started the job yet, or it has
    // ended: the group path decides.
    if (stopped.kind === 'empty' && stopped.reached === 0 && !stopped.escalated)
      return this.stopBeforeStart(ref, handleText, expected, graceMs);
    return this.containedOutcome(ref, stopped, expected);
  }

  /**
   * The job's cgroup was empty before anything was signalled. The launcher's group is stopped; a job
   * the launcher started after the cgroup was read (a launcher that already ignores TERM does not
   * end by it, docs/decisions/0310) is then in the cgroup, and is stopped there.
   */
  private async stopBeforeStart(
    ref: JobCgroupRef,
    handleText: string,
    expected: ExpectedIdentity,
    graceMs: number,
  ): Promise<TerminationOutcome> {
    const byGroup = await this.stopByGroup(handleText, expected, graceMs);
    if (jobCgroupPopulated(ref) !== true) return byGroup;
    return this.containedOutcome(ref, await stopJobCgroup(ref, graceMs, KILL_CONFIRM_MS), expected);
  }

  private async containedOutcome(
    ref: JobCgroupRef,
    stopped: CgroupStopOutcome,
    expected: ExpectedIdentity,
  ): Promise<TerminationOutcome> {
    switch (stopped.kind) {
      case 'gone':
        return this.containedCgroupGone(expected);
      case 'unsupported':
        return outcome('unsupported');
      case 'still_populated':
        return outcome('termination_requested', true, false);
      case 'empty':
        cgroupRemove(ref); // best effort: the launcher removes it too, whichever comes first
        if (stopped.reached > 0) this.report({ signal: 'SIGTERM', mode: 'cgroup', seconds: stopped.termSeconds });
        return outcome('termination_requested', stopped.escalated, true);
    }
  }

  private async containedCgroupGone(expected: ExpectedIdentity): Promise<TerminationOutcome> {
    const waited = await waitExit(expected, CGROUP_GONE_LAUNCHER_EXIT_MS);
    if (waited.kind === 'exited' || waited.kind === 'already_exited') return outcome('already_exited', false, true);
    if (waited.kind === 'error') throw signalFailure(waited);
    return outcome('identity_mismatch');
  }

  /** TERM then CONT to the group, each after its own proof; null when both went out. */
  private termAndResume(expected: ExpectedIdentity): TerminationOutcome | null {
    const term = this.verified(expected, 'SIGTERM');
    if (term.kind !== 'signalled') return this.firstSignalRefused(term);
    // A stopped group keeps TERM pending until it runs again.
    const resume = this.verified(expected, 'SIGCONT');
    if (resume.kind === 'error') throw signalFailure(resume);
    return null;
  }

  /**
   * With a held pidfd: wait for the leader; then give members that outlive it the rest of the
   * grace period, and KILL whatever of the group is left through the same pidfd.
   */
  private async stopGroup(expected: ExpectedIdentity, hold: GroupHold, graceMs: number): Promise<TerminationOutcome> {
    const refused = this.termAndResume(expected);
    if (refused) return refused;
    const deadline = monotonicMs() + graceMs;
    if (await settlesWithin(hold.exited, graceMs)) {
      if (await groupEmptiedBy(hold, deadline)) return outcome('termination_requested', false, true);
      const sweep = this.throughHold(hold, 'SIGKILL');
      if (sweep.kind === 'error') throw signalFailure(sweep);
      return outcome('termination_requested', sweep.kind === 'signalled', true);
    }
    const kill = this.verified(expected, 'SIGKILL');
    if (kill.kind === 'error') throw signalFailure(kill);
    if (kill.kind !== 'signalled') return outcome('termination_requested', false, kill.kind === 'already_exited');
    return outcome('termination_requested', true, await settlesWithin(hold.exited, KILL_CONFIRM_MS));
  }

  /**
   * The leader is gone but the runner held its group: TERM, CONT, the grace, then KILL, each
   * through the held pidfd, and the answer says whether the group was seen empty.
   */
  private async stopOrphanedGroup(hold: GroupHold, graceMs: number): Promise<TerminationOutcome> {
    const term = this.throughHold(hold, 'SIGTERM');
    if (term.kind === 'already_exited') return outcome('already_exited', false, true);
    if (term.kind === 'unsupported') return outcome('unsupported');
    if (term.kind === 'error') throw signalFailure(term);
    const resume = this.throughHold(hold, 'SIGCONT');
    if (resume.kind === 'error') throw signalFailure(resume);
    if (await groupEmptiedBy(hold, monotonicMs() + graceMs)) return outcome('termination_requested', false, true);
    const kill = this.throughHold(hold, 'SIGKILL');
    if (kill.kind === 'error') throw signalFailure(kill);
    return outcome(
      'termination_requested',
      kill.kind === 'signalled',
      await groupEmptiedBy(hold, monotonicMs() + KILL_CONFIRM_MS),
    );
  }

  /** Kernels without the group flag: the leader's exit ends what can be proved. */
  private async stopLeader(expected: ExpectedIdentity, graceMs: number): Promise<TerminationOutcome> {
    const refused = this.termAndResume(expected);
    if (refused) return refused;
    const waited = await waitExit(expected, graceMs);
    if (waited.kind !== 'timeout')
      return outcome('termination_requested', false, waited.kind === 'exited' || waited.kind === 'already_exited');

    const kill = this.verified(expected, 'SIGKILL');
    if (kill.kind === 'error') throw signalFailure(kill);
    if (kill.kind !== 'signalled') return outcome('termination_requested', false, kill.kind === 'already_exited');
    const killed = await waitExit(expected, KILL_CONFIRM_MS);
    return outcome('termination_requested', true, killed.kind === 'exited' || killed.kind === 'already_exited');
  }

  private firstSignalRefused(result: Exclude<SignalOutcome, { kind: 'signalled' }>): TerminationOutcome {
    switch (result.kind) {
      case 'already_exited':
        return outcome('already_exited', false, true);
      case 'identity_mismatch':
        return outcome('identity_mismatch');
      case 'unsupported':
        return outcome('unsupported');
      case 'invalid':
        return outcome('invalid');
      case 'error':
        throw signalFailure(result);
    }
  }
}
