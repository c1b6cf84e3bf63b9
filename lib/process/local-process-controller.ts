// LocalProcessController: stops the exact process group a durable handle names (ADR-0005 §2.3-2.5,
// ADR-0072 §3). Every signal is preceded by its own proof; the whole call is bounded.
import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { capabilities, signalVerified, waitExit, type ExpectedIdentity, type SignalOutcome } from '../native/index';
import { validatePid } from '../native/validate';
import { handleExpectedIdentity, parseHandle } from './durable-handle';

/** The longest TERM grace a caller may ask for (Kubernetes' default is 30 s as well). */
export const GRACE_MS_MAX = 30_000;
/** How long to wait for the exit after SIGKILL before answering (KILL cannot be ignored). */
export const KILL_CONFIRM_MS = 2_000;
/** Room for the proofs and signals themselves (microseconds each) on a slow, loaded device. */
export const CONTROL_OVERHEAD_MS = 500;

export type TerminationResult =
  | 'termination_requested'
  | 'already_exited'
  | 'identity_mismatch'
  | 'pid_mismatch'
  | 'unsupported'
  | 'invalid';

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
function signalFailure(result: Extract<SignalOutcome, { outcome: 'error' }>): PidfenceError {
  return new PidfenceError(`signalling failed with ${result.errno}; the dispatch will be retried.`, 'ERR_PIDFENCE_SIGNAL_FAILED', { errno: result.errno });
}

export class LocalProcessController {
  /** The platform of the handles this controller understands. */
  readonly platform = 'linux';

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
    let attemptPid: number;
    try {
      expected = handleExpectedIdentity(parseHandle(request.handle));
      attemptPid = validatePid(request.attemptPid, 'attemptPid');
    } catch (error) {
      if (error instanceof PidfenceTypeError || error instanceof PidfenceRangeError) return outcome('invalid');
      throw error;
    }
    if (capabilities().groupSignalMode === 'unsupported') return outcome('unsupported');
    if (attemptPid !== expected.pid) return outcome('pid_mismatch');

    const term = signalVerified(expected, 'SIGTERM', { group: true });
    if (term.outcome !== 'signalled') return this.firstSignalRefused(term);
    // A stopped group keeps TERM pending until it runs again.
    const resume = signalVerified(expected, 'SIGCONT', { group: true });
    if (resume.outcome === 'error') throw signalFailure(resume);

    const waited = await waitExit(expected, graceMs);
    if (waited.outcome !== 'timeout') return outcome('termination_requested', false, waited.outcome === 'exited' || waited.outcome === 'already_exited');

    const kill = signalVerified(expected, 'SIGKILL', { group: true });
    if (kill.outcome === 'error') throw signalFailure(kill);
    if (kill.outcome !== 'signalled') return outcome('termination_requested', false, kill.outcome === 'already_exited');
    const killed = await waitExit(expected, KILL_CONFIRM_MS);
    return outcome('termination_requested', true, killed.outcome === 'exited' || killed.outcome === 'already_exited');
  }

  private firstSignalRefused(result: Exclude<SignalOutcome, { outcome: 'signalled' }>): TerminationOutcome {
    switch (result.outcome) {
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
