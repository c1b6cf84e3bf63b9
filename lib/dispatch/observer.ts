// The observer the dispatch and execution layers tell what they did (docs/decisions/0110): counts and
// durations for metrics, never a run id, PID, owner or token. The default does nothing; the metrics
// adapter (lib/metrics, prom-client) is one implementation, wired in only when metrics are asked for.
import type { ClaimOutcome, DispatchResult } from '../contract/index';
import type { VerifiedSignal } from '../process/index';

export type { VerifiedSignal } from '../process/index';

export type ClaimKind = ClaimOutcome['kind'];

/** Every claim outcome, in the order of design/dispatch §2.2 (bounded metric labels). */
export const CLAIM_KINDS = [
  'claimed',
  'leased',
  'not_due',
  'dispatched',
  'blocked',
  'not_eligible',
  'attempt_conflict',
] as const satisfies readonly ClaimKind[];

/** The group-signal modes of a stop (design/dispatch §2.3): the modes a stop is counted by. */
export const STOP_MODES = [
  'pidfd-process-group',
  'pgid-after-pidfd-check',
  'cgroup',
] as const satisfies readonly VerifiedSignal['mode'][];

export interface DispatchObserver {
  /** A claim was answered (dispatcher or the cluster's stop wrapper). */
  onClaim(outcome: ClaimKind): void;
  /** The controller answered a claimed dispatch (before its result was recorded). */
  onControllerAnswer(result: DispatchResult): void;
  /** A result was recorded; `claimSettleSeconds` is the claim and the result transaction together. */
  onSettled(result: DispatchResult, claimSettleSeconds: number): void;
  /** A result was refused by the fence: a newer owner had taken the lease over. */
  onStaleFence(): void;
  /** A supervisor cycle ended; `failed` when it rejected (store error, a page that broke the contract). */
  onCycle(failed: boolean): void;
  /** A signal went out after its proof (the local controller). */
  onSignal(signal: VerifiedSignal): void;
  /** A cancelled or timed-out job was seen ended, this long after its cancel intent was recorded. */
  onCancelToExit(seconds: number): void;
}

const nothing = (): void => undefined;

export const NO_OBSERVER: DispatchObserver = Object.freeze({
  onClaim: nothing,
  onControllerAnswer: nothing,
  onSettled: nothing,
  onStaleFence: nothing,
  onCycle: nothing,
  onSignal: nothing,
  onCancelToExit: nothing,
});

/**
 * Any part of an observer, made whole and safe: a missing method does nothing, and a throwing one
 * never reaches the caller (observation is not authority: it cannot change a stop).
 */
export function observerOf(observer: Partial<DispatchObserver> | undefined): DispatchObserver {
  if (observer === undefined) return NO_OBSERVER;
  const safe = <A extends unknown[]>(method: ((...args: A) => void) | undefined): ((...args: A) => void) => {
    if (method === undefined) return nothing;
    return (...args: A) => {
      try {
        method.apply(observer, args);
      } catch {
        // nothing: see above
      }
    };
  };
  return {
    onClaim: safe(observer.onClaim),
    onControllerAnswer: safe(observer.onControllerAnswer),
    onSettled: safe(observer.onSettled),
    onStaleFence: safe(observer.onStaleFence),
    onCycle: safe(observer.onCycle),
    onSignal: safe(observer.onSignal),
    onCancelToExit: safe(observer.onCancelToExit),
  };
}
