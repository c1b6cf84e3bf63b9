// Dispatcher (design/dispatch §2.2-2.5): for one due run — claim, call the controller registered for the
// handle's platform outside any transaction, record the result with the exact fence of the claim.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import { monotonicNow, secondsSince } from '../base/time';
import { PidfenceRangeError } from '../base/errors';
import { GRACE_MS_MAX, handlePlatform, type TerminationResult } from '../process/index';
import {
  DEFAULT_BACKOFF,
  OWNER_MAX_LENGTH,
  backoffDelayMs,
  classifyResult,
  createLeaseToken,
  validateBoundedInteger,
  validateLeaseDurationMs,
  validateOwner,
  type BackoffPolicy,
  type ClaimOutcome,
  type DispatchResult,
  type DueItem,
  type SettledStatus,
} from '../contract/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { RunStore } from '../store/run-store';
import type { ControllerRegistry } from './controller-registry';
import { failureFactsOf, type FailureFacts } from './diagnostics';
import { observerOf, type DispatchObserver } from './observer';

/**
 * Time the result transaction may still need after the controller returned. The lease must cover
 * controller bound + this margin, so a live owner never loses its lease while settling.
 */
export const LEASE_SETTLE_MARGIN_MS = 1_000;

/** The fence of one claim. Test hooks only: it carries the raw token and must never be logged. */
export interface DispatchFence {
  readonly runId: string;
  readonly attemptId: string;
  readonly owner: string;
  readonly token: string;
  readonly expectedVersion: number;
}

/**
 * TEST ONLY. Lets a crash-window test stop the process between the signal and the result commit
 * (design/dispatch §2.5). A hook that never resolves holds the dispatch there; production code passes none.
 */
export interface DispatcherTestHooks {
  /** After a successful claim, before the controller is called. */
  afterClaim?(fence: DispatchFence): void | Promise<void>;
  /** After the controller returned (the signal may have been sent), before the result commits. */
  afterControllerCall?(fence: DispatchFence, result: DispatchResult): void | Promise<void>;
}

export interface DispatcherOptions {
  readonly repository: DispatchRepository;
  /** Only getAttempt is used: the Attempt's PID and durable handle. */
  readonly runStore: Pick<RunStore, 'getAttempt'>;
  readonly controllers: ControllerRegistry;
  /** TERM grace passed to the controller. */
  readonly graceMs: number;
  /** Must exceed every registered controller's boundMs(graceMs) + LEASE_SETTLE_MARGIN_MS. */
  readonly leaseDurationMs: number;
  /** Stable lease-owner id of this dispatcher (a replica id); defaultOwnerId() when omitted. */
  readonly owner?: string;
  readonly backoff?: BackoffPolicy;
  /** Told of claims, answers, results and stale fences (metrics, docs/decisions/0110); default: nothing. */
  readonly observer?: Partial<DispatchObserver>;
  /**
   * Told once a claim is won, just before the controller is asked to stop the process (TERM, then
   * KILL after graceMs): a foreground runner tells its user why the next seconds are quiet. Run and
   * attempt id only; a throwing observer changes nothing.
   */
  readonly onStopping?: (target: { readonly runId: string; readonly attemptId: string }) => void;
  /** TEST ONLY, see DispatcherTestHooks. */
  readonly testHooks?: DispatcherTestHooks;
}

/**
 * Low-sensitivity: no PID, handle, owner or token. `controllerFailure`: the controller threw (the
 * result is then `dispatch_error`), reduced to its code and errno for the diagnostics channel.
 */
export type DispatchOutcome =
  | { readonly kind: 'recorded'; readonly result: DispatchResult; readonly status: SettledStatus; readonly dispatchCount: number; readonly controllerFailure: FailureFacts | null }
  /** Our lease was taken over while we called the controller; the newer owner's result stands. */
  | { readonly kind: 'stale_fence'; readonly result: DispatchResult; readonly controllerFailure: FailureFacts | null }
  /** The claim did not grant a lease: someone else holds it, it is not due, settled, or ineligible. */
  | { readonly kind: 'not_claimed'; readonly claim: Exclude<ClaimOutcome['kind'], 'claimed'> };

/** The diagnostic code of a controller that answered something outside its contract. */
export const CONTROLLER_ANSWER_INVALID = 'ERR_PIDFENCE_CONTROLLER_ANSWER';

/** What a controller may answer; anything else is treated as a controller failure. */
const TERMINATION_RESULTS: ReadonlySet<string> = new Set<TerminationResult>(['termination_requested', 'already_exited', 'identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid']);

export type DispatchTarget = Pick<DueItem, 'runId' | 'attemptId' | 'cancelRequestedAtMs'>;

/** `<host>/<pid>/<random>`, trimmed to the contract's owner alphabet and length. */
export function defaultOwnerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'host';
  const suffix = `/${process.pid}/${randomUUID().slice(0, 8)}`;
  return `${host.slice(0, OWNER_MAX_LENGTH - suffix.length)}${suffix}`;
}

export class Dispatcher {
  readonly owner: string;
  readonly leaseDurationMs: number;
  readonly graceMs: number;
  readonly #repository: DispatchRepository;
  readonly #runStore: Pick<RunStore, 'getAttempt'>;
  readonly #controllers: ControllerRegistry;
  readonly #backoff: BackoffPolicy;
  readonly #hooks: DispatcherTestHooks;
  readonly #observer: DispatchObserver;
  readonly #onStopping: DispatcherOptions['onStopping'];

  constructor(options: DispatcherOptions) {
    this.owner = validateOwner(options.owner ?? defaultOwnerId());
    this.leaseDurationMs = validateLeaseDurationMs(options.leaseDurationMs);
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    backoffDelayMs(1, this.#backoff); // validates the policy against the retry-delay limits now
    this.#controllers = options.controllers;
    this.graceMs = validateBoundedInteger(options.graceMs, 'graceMs', 0, GRACE_MS_MAX, 'ERR_PIDFENCE_INVALID_GRACE');
    for (const controller of this.#controllers.all()) {
      const needed = controller.boundMs(this.graceMs) + LEASE_SETTLE_MARGIN_MS;
      if (!(this.leaseDurationMs > needed)) {
        throw new PidfenceRangeError(
          `leaseDurationMs ${this.leaseDurationMs} does not outlast the "${controller.platform}" controller: one call with graceMs ${this.graceMs} takes up to ${needed - LEASE_SETTLE_MARGIN_MS} ms plus ${LEASE_SETTLE_MARGIN_MS} ms to settle. Use a lease above ${needed} ms or a shorter grace.`,
          'ERR_PIDFENCE_LEASE_TOO_SHORT',
        );
      }
    }
    this.#repository = options.repository;
    this.#runStore = options.runStore;
    this.#hooks = options.testHooks ?? {};
    this.#observer = observerOf(options.observer);
    this.#onStopping = options.onStopping;
  }

  /** Claim → controller → recordResult for one due run. Store failures reject; controller failures are results. */
  async dispatch(target: DispatchTarget): Promise<DispatchOutcome> {
    const token = createLeaseToken();
    const claimStarted = monotonicNow();
    const claim = await this.#repository.claim({
      runId: target.runId,
      attemptId: target.attemptId,
      cancelRequestedAtMs: target.cancelRequestedAtMs,
      owner: this.owner,
      token,
      leaseDurationMs: this.leaseDurationMs,
    });
    const claimSeconds = secondsSince(claimStarted);
    this.#observer.onClaim(claim.kind);
    if (claim.kind !== 'claimed') return { kind: 'not_claimed', claim: claim.kind };

    const fence: DispatchFence = { runId: target.runId, attemptId: target.attemptId, owner: this.owner, token, expectedVersion: claim.record.version };
    await this.#hooks.afterClaim?.(fence);
    try {
      this.#onStopping?.({ runId: target.runId, attemptId: target.attemptId });
    } catch {
      // an observer must not change a stop
    }
    const { result, failure } = await this.#callController(target);
    this.#observer.onControllerAnswer(result);
    await this.#hooks.afterControllerCall?.(fence, result);

    const retryable = classifyResult(result).retryable;
    const settleStarted = monotonicNow();
    const recorded = await this.#repository.recordResult({
      ...fence,
      result,
      eventId: `evt-${randomUUID()}`,
      ...(retryable ? { retryDelayMs: backoffDelayMs(claim.record.dispatchCount, this.#backoff) } : {}),
    });
    if (recorded.kind === 'stale_fence') {
      this.#observer.onStaleFence();
      return { kind: 'stale_fence', result, controllerFailure: failure };
    }
    this.#observer.onSettled(result, claimSeconds + secondsSince(settleStarted));
    return { kind: 'recorded', result, status: recorded.record.status as SettledStatus, dispatchCount: recorded.record.dispatchCount, controllerFailure: failure };
  }

  /**
   * design/dispatch §2.3-2.4: the controller's verdict, or the retryable result that stands for its
   * absence or failure; a thrown failure is kept as its code and errno for the diagnostics.
   */
  async #callController(target: DispatchTarget): Promise<{ readonly result: DispatchResult; readonly failure: FailureFacts | null }> {
    const verdict = (result: DispatchResult) => ({ result, failure: null });
    const attempt = await this.#runStore.getAttempt(target.runId, target.attemptId);
    if (attempt === null || attempt.handle === null || attempt.pid === null) return verdict('handle_missing');
    const platform = handlePlatform(attempt.handle);
    if (platform === null) return verdict('invalid');
    const controller = this.#controllers.get(platform);
    if (controller === undefined) return verdict('controller_missing');
    try {
      const outcome = await controller.requestTermination({ attemptPid: attempt.pid, handle: attempt.handle, graceMs: this.graceMs });
      if (TERMINATION_RESULTS.has(outcome?.result)) return verdict(outcome.result);
      return { result: 'dispatch_error', failure: { code: CONTROLLER_ANSWER_INVALID, errno: null } };
    } catch (error) {
      // The error text may carry paths: only the enum reaches the event, only code and errno the diagnostics.
      return { result: 'dispatch_error', failure: failureFactsOf(error) };
    }
  }
}
