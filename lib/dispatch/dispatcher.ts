// Dispatcher (design/dispatch §2.2-2.5): for one due run — claim, call the controller registered for the
// handle's platform outside any transaction, record the result with the exact fence of the claim.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import { mapBounded } from '../base/bounded-map';
import { monotonicNow, secondsSince } from '../base/time';
import { PidfenceRangeError } from '../base/errors';
import { GRACE_MS_MAX, handlePlatform, type TerminationResult } from '../process/index';
import {
  DEFAULT_BACKOFF,
  DUE_PAGE_MAX,
  LEASE_DURATION_MAX_MS,
  OWNER_MAX_LENGTH,
  backoffDelayMs,
  classifyResult,
  createLeaseToken,
  validateBoundedInteger,
  validateLeaseDurationMs,
  validateOwner,
  type AttemptRecord,
  type BackoffPolicy,
  type CancellationDispatchRecord,
  type ClaimOutcome,
  type DispatchResult,
  type DueCursor,
  type DueItem,
  type DuePage,
  type RecordResultCommand,
  type RecordResultOutcome,
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

/**
 * A lease that covers a claimed page of `pageSize` items even if they were worked one after the
 * other, each a controller call of up to `boundMs` and its settle, plus one margin; capped at the
 * contract's maximum, where the Dispatcher claims fewer at once (docs/decisions/0023). The page's
 * stops run side by side (docs/decisions/0350), so this bound is kept as the conservative one.
 */
export function pageLeaseMs(boundMs: number, pageSize: number): number {
  return Math.min(LEASE_DURATION_MAX_MS, pageSize * (boundMs + LEASE_SETTLE_MARGIN_MS) + LEASE_SETTLE_MARGIN_MS);
}

/**
 * Controller calls of one claimed chunk in flight at once by default (docs/decisions/0350): all of
 * them, as a chunk holds at most DUE_PAGE_MAX items; the stops of a page wait out their jobs side by
 * side instead of one after the other.
 */
export const STOP_CONCURRENCY_DEFAULT = DUE_PAGE_MAX;

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
  readonly runStore: Pick<RunStore, 'getAttempt' | 'getAttempts'>;
  readonly controllers: ControllerRegistry;
  /** TERM grace passed to the controller. */
  readonly graceMs: number;
  /** Must exceed every registered controller's boundMs(graceMs) + LEASE_SETTLE_MARGIN_MS. */
  readonly leaseDurationMs: number;
  /**
   * Controller calls of one claimed chunk in flight at once, 1 to DUE_PAGE_MAX; default
   * STOP_CONCURRENCY_DEFAULT, the whole chunk (docs/decisions/0350). The lease does not depend on it.
   */
  readonly stopConcurrency?: number;
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
  | {
      readonly kind: 'recorded';
      readonly result: DispatchResult;
      readonly status: SettledStatus;
      readonly dispatchCount: number;
      readonly controllerFailure: FailureFacts | null;
    }
  /** Our lease was taken over while we called the controller; the newer owner's result stands. */
  | { readonly kind: 'stale_fence'; readonly result: DispatchResult; readonly controllerFailure: FailureFacts | null }
  /** The claim did not grant a lease: someone else holds it, it is not due, settled, or ineligible. */
  | { readonly kind: 'not_claimed'; readonly claim: Exclude<ClaimOutcome['kind'], 'claimed'> };

/** The diagnostic code of a controller that answered something outside its contract. */
export const CONTROLLER_ANSWER_INVALID = 'ERR_PIDFENCE_CONTROLLER_ANSWER';

/** What a controller may answer; anything else is treated as a controller failure. */
const TERMINATION_RESULTS: ReadonlySet<string> = new Set<TerminationResult>([
  'termination_requested',
  'already_exited',
  'identity_mismatch',
  'pid_mismatch',
  'unsupported',
  'invalid',
]);

export type DispatchTarget = Pick<DueItem, 'runId' | 'attemptId' | 'cancelRequestedAtMs'>;

/** A target with the fresh token of its claim. */
type ClaimTarget = DispatchTarget & { readonly token: string };

function validateStopConcurrency(value: unknown): number {
  return validateBoundedInteger(value, 'stopConcurrency', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_STOP_CONCURRENCY');
}

/** `<host>/<pid>/<random>`, trimmed to the contract's owner alphabet and length. */
export function defaultOwnerId(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '') || 'host';
  const suffix = `/${process.pid}/${randomUUID().slice(0, 8)}`;
  return `${host.slice(0, OWNER_MAX_LENGTH - suffix.length)}${suffix}`;
}

/** A won claim after its controller call: the result to settle and the failure for the diagnostics. */
interface Stop {
  readonly command: RecordResultCommand;
  readonly failure: FailureFacts | null;
}

export class Dispatcher {
  readonly owner: string;
  readonly leaseDurationMs: number;
  readonly graceMs: number;
  /**
   * Items one page claim may take (docs/decisions/0023): as many as the lease covers one after the
   * other, each a controller call plus its settle, at most DUE_PAGE_MAX; 1 means claim by claim.
   */
  readonly claimPageSize: number;
  /** Controller calls of one claimed chunk in flight at once (docs/decisions/0350). */
  readonly stopConcurrency: number;
  readonly #repository: DispatchRepository;
  readonly #runStore: Pick<RunStore, 'getAttempt' | 'getAttempts'>;
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
    let perItemMs = LEASE_SETTLE_MARGIN_MS;
    for (const controller of this.#controllers.all()) {
      const needed = controller.boundMs(this.graceMs) + LEASE_SETTLE_MARGIN_MS;
      perItemMs = Math.max(perItemMs, needed);
      if (!(this.leaseDurationMs > needed)) {
        throw new PidfenceRangeError(
          `leaseDurationMs ${this.leaseDurationMs} does not outlast the "${controller.platform}" controller: one call with graceMs ${this.graceMs} takes up to ${needed - LEASE_SETTLE_MARGIN_MS} ms plus ${LEASE_SETTLE_MARGIN_MS} ms to settle. Use a lease above ${needed} ms or a shorter grace.`,
          'ERR_PIDFENCE_LEASE_TOO_SHORT',
        );
      }
    }
    this.claimPageSize = Math.max(1, Math.min(DUE_PAGE_MAX, Math.floor((this.leaseDurationMs - 1) / perItemMs)));
    this.stopConcurrency = validateStopConcurrency(options.stopConcurrency ?? STOP_CONCURRENCY_DEFAULT);
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
    const stop = await this.#stop(
      target,
      token,
      claim.record,
      await this.#runStore.getAttempt(target.runId, target.attemptId),
    );
    const settleStarted = monotonicNow();
    const recorded = await this.#repository.recordResult(stop.command);
    return this.#outcomeOf(stop, recorded, claimSeconds + secondsSince(settleStarted));
  }

  /**
   * Claim → controller → recordResult for a page of due runs (docs/decisions/0023): the page is
   * claimed in one transaction per `claimPageSize` items, whose lease covers all of their controller
   * calls even one after the other; each claimed item gets its own controller call, up to
   * `stopConcurrency` of them at once (docs/decisions/0350), then the chunk's results settle together
   * in one transaction, each with its own fence. Outcomes in the page's order; `onOutcome` hears each
   * one once it is settled.
   */
  async dispatchPage(
    targets: readonly DispatchTarget[],
    onOutcome?: (target: DispatchTarget, outcome: DispatchOutcome) => void,
  ): Promise<DispatchOutcome[]> {
    const outcomes: DispatchOutcome[] = [];
    for (let start = 0; start < targets.length; start += this.claimPageSize) {
      const chunk = targets.slice(start, start + this.claimPageSize).map((target) => ({
        runId: target.runId,
        attemptId: target.attemptId,
        cancelRequestedAtMs: target.cancelRequestedAtMs,
        token: createLeaseToken(),
      }));
      const claimStarted = monotonicNow();
      const claims = await this.#repository.claimPage({
        owner: this.owner,
        leaseDurationMs: this.leaseDurationMs,
        items: chunk,
      });
      outcomes.push(...(await this.#stopAndSettle(chunk, claims, secondsSince(claimStarted), onOutcome)));
    }
    return outcomes;
  }

  /**
   * docs/decisions/0025: reads the next due page and claims it in one transaction — at most
   * claimPageSize items, so the lease covers them all — then stops and settles as dispatchPage does.
   * An item whose run another transaction held was passed over: it has no outcome here. `check`
   * sees the page before any controller is called; if it throws, nothing is stopped and the leases
   * just taken expire.
   */
  async dispatchDuePage(
    query: { readonly limit: number; readonly after?: DueCursor; readonly runnerId?: string },
    check?: (page: DuePage) => void,
  ): Promise<{ readonly page: DuePage; readonly outcomes: DispatchOutcome[]; readonly passedOver: number }> {
    const tokens = Array.from({ length: Math.min(query.limit, this.claimPageSize) }, () => createLeaseToken());
    const claimStarted = monotonicNow();
    const claimed = await this.#repository.claimDuePage({
      owner: this.owner,
      leaseDurationMs: this.leaseDurationMs,
      tokens,
      ...(query.after === undefined ? {} : { after: query.after }),
      ...(query.runnerId === undefined ? {} : { runnerId: query.runnerId }),
    });
    const claimSeconds = secondsSince(claimStarted);
    const page: DuePage = { items: claimed.items.map((entry) => entry.item), next: claimed.next };
    check?.(page);
    const chunk: ClaimTarget[] = [];
    const claims: ClaimOutcome[] = [];
    for (const [i, { item, outcome }] of claimed.items.entries()) {
      if (outcome.kind === 'passed_over') continue;
      chunk.push({
        runId: item.runId,
        attemptId: item.attemptId,
        cancelRequestedAtMs: item.cancelRequestedAtMs,
        token: tokens[i] as string,
      });
      claims.push(outcome);
    }
    const outcomes = chunk.length === 0 ? [] : await this.#stopAndSettle(chunk, claims, claimSeconds);
    return { page, outcomes, passedOver: claimed.items.length - chunk.length };
  }

  /**
   * After a chunk's claims: one attempt read for the won ones, each its own controller call (up to
   * `stopConcurrency` at once, docs/decisions/0350), then one grouped settle, each with its own
   * fence. Outcomes in the chunk's order.
   */
  async #stopAndSettle(
    chunk: readonly ClaimTarget[],
    claims: readonly ClaimOutcome[],
    claimSeconds: number,
    onOutcome?: (target: DispatchTarget, outcome: DispatchOutcome) => void,
  ): Promise<DispatchOutcome[]> {
    for (const claim of claims) this.#observer.onClaim(claim.kind);
    const won = chunk.flatMap((item, i) => {
      const claim = claims[i] as ClaimOutcome;
      return claim.kind === 'claimed' ? [{ item, record: claim.record }] : [];
    });
    const attempts =
      won.length === 0
        ? []
        : await this.#runStore.getAttempts(won.map(({ item }) => ({ runId: item.runId, attemptId: item.attemptId })));
    // Each stop may wait out its job's whole grace: side by side, a page takes the longest of them,
    // not their sum; each keeps its own fence and result.
    const stops = await mapBounded(won, this.stopConcurrency, ({ item, record }, i) =>
      this.#stop(item, item.token, record, attempts[i] ?? null),
    );
    const commands = stops.map((stop) => stop.command);
    const settleStarted = monotonicNow();
    const recorded = commands.length === 0 ? [] : await this.#repository.recordResults(commands);
    // Store time of the page's claim and settle transactions, which each item waited for.
    const storeSeconds = claimSeconds + secondsSince(settleStarted);
    const outcomes: DispatchOutcome[] = [];
    let settled = 0; // the won items come in the chunk's order, as their stops and results do
    for (const [i, item] of chunk.entries()) {
      const claim = claims[i] as ClaimOutcome;
      const at = claim.kind === 'claimed' ? settled++ : -1;
      const outcome: DispatchOutcome =
        claim.kind === 'claimed'
          ? this.#outcomeOf(stops[at] as Stop, recorded[at] as RecordResultOutcome, storeSeconds)
          : { kind: 'not_claimed', claim: claim.kind };
      onOutcome?.(item, outcome);
      outcomes.push(outcome);
    }
    return outcomes;
  }

  /** After a won claim: the observer, the controller call with the test hooks around it, and the result to settle. */
  async #stop(
    target: DispatchTarget,
    token: string,
    record: CancellationDispatchRecord,
    attempt: AttemptRecord | null,
  ): Promise<Stop> {
    const fence: DispatchFence = {
      runId: target.runId,
      attemptId: target.attemptId,
      owner: this.owner,
      token,
      expectedVersion: record.version,
    };
    await this.#hooks.afterClaim?.(fence);
    try {
      this.#onStopping?.({ runId: target.runId, attemptId: target.attemptId });
    } catch {
      // an observer must not change a stop
    }
    const { result, failure } = await this.#callController(attempt);
    this.#observer.onControllerAnswer(result);
    await this.#hooks.afterControllerCall?.(fence, result);
    const retryable = classifyResult(result).retryable;
    const command: RecordResultCommand = {
      ...fence,
      result,
      eventId: `evt-${randomUUID()}`,
      ...(retryable ? { retryDelayMs: backoffDelayMs(record.dispatchCount, this.#backoff) } : {}),
    };
    return { command, failure };
  }

  /** `storeSeconds`: the claim and settle transactions' time, for the observer. */
  #outcomeOf(stop: Stop, recorded: RecordResultOutcome, storeSeconds: number): DispatchOutcome {
    const { result } = stop.command;
    if (recorded.kind === 'stale_fence') {
      this.#observer.onStaleFence();
      return { kind: 'stale_fence', result, controllerFailure: stop.failure };
    }
    this.#observer.onSettled(result, storeSeconds);
    return {
      kind: 'recorded',
      result,
      status: recorded.record.status as SettledStatus,
      dispatchCount: recorded.record.dispatchCount,
      controllerFailure: stop.failure,
    };
  }

  /**
   * design/dispatch §2.3-2.4: the controller's verdict, or the retryable result that stands for its
   * absence or failure; a thrown failure is kept as its code and errno for the diagnostics.
   */
  async #callController(
    attempt: AttemptRecord | null,
  ): Promise<{ readonly result: DispatchResult; readonly failure: FailureFacts | null }> {
    const verdict = (result: DispatchResult) => ({ result, failure: null });
    if (attempt === null || attempt.handle === null || attempt.pid === null) return verdict('handle_missing');
    const platform = handlePlatform(attempt.handle);
    if (platform === null) return verdict('invalid');
    const controller = this.#controllers.get(platform);
    if (controller === undefined) return verdict('controller_missing');
    try {
      const outcome = await controller.requestTermination({
        attemptPid: attempt.pid,
        handle: attempt.handle,
        graceMs: this.graceMs,
      });
      if (TERMINATION_RESULTS.has(outcome?.result)) return verdict(outcome.result);
      return { result: 'dispatch_error', failure: { code: CONTROLLER_ANSWER_INVALID, errno: null } };
    } catch (error) {
      // The error text may carry paths: only the enum reaches the event, only code and errno the diagnostics.
      return { result: 'dispatch_error', failure: failureFactsOf(error) };
    }
  }
}
