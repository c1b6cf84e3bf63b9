// The cancellation wrapper around the worker's lease-control tick (docs/decisions/0101; design/cluster).
// The worker's authenticated tick stays the only trigger: no scanner, timer or queue here. A stop
// reaches the worker only after its dispatch is durably settled `termination_requested` with its
// `run.cancel_dispatched` event; anything that cannot prove that fails closed.
import { randomUUID } from 'node:crypto';

import { monotonicNow, secondsSince } from '../base/time';
import { PidfenceError } from '../base/errors';
import {
  createLeaseToken,
  DUE_PAGE_MAX,
  validateLeaseDurationMs,
  validateOwner,
  type ClaimOutcome,
} from '../contract/index';
import { observerOf, type DispatchObserver } from '../dispatch/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { LeaseRef, LeaseTickAnswer, LeaseTickPage, WorkerCaller } from '../store/postgres/index';
import type { DispatchAvailability, DispatchFailureCode } from './availability';

/** What the worker receives: the tick's answer; a stop carries whether a dispatch fact backs it. */
export type ControlledTickAnswer =
  | Exclude<LeaseTickAnswer, { readonly kind: 'stop_requested' }>
  | (Extract<LeaseTickAnswer, { readonly kind: 'stop_requested' }> & { readonly tracking: 'dispatched' | 'untracked' });

/** Only fixed states, codes and the scope: never a run, worker, attempt, token or error text. */
export interface DispatchObservation {
  readonly kind: 'bypass' | 'settled' | 'replayed' | 'untracked' | 'failed_closed';
  readonly code: DispatchFailureCode | null;
  readonly scope: 'run' | 'attempt' | null;
}

/** One lease's answer in a page: a stop that could not be proved settled is `unavailable` with its code. */
export type PageAnswer = ControlledTickAnswer | { readonly kind: 'unavailable'; readonly code: DispatchFailureCode };

/** The wrapped lease page; `answers` holds only the leases whose answer is not a plain renewal. */
export interface ControlledTickPage {
  readonly session: LeaseTickPage['session'];
  readonly expiresAtMs: number;
  readonly answers: ReadonlyMap<string, PageAnswer>;
}

type StopAnswer = Extract<LeaseTickAnswer, { readonly kind: 'stop_requested' }>;

export interface LeaseControl {
  tickPage(caller: WorkerCaller, refs: readonly LeaseRef[]): Promise<LeaseTickPage>;
}

/**
 * TEST ONLY. Lets a crash-window test hold a replica inside its stop tick (design/cluster §D3): after
 * the claim committed and before the settlement, or after the settlement committed and before the
 * stop is released. A hook that never resolves holds the tick there; production code passes none.
 */
export interface DispatchControlTestHooks {
  afterClaim?(): void | Promise<void>;
  afterSettle?(): void | Promise<void>;
}

export interface DispatchControlOptions {
  /** The replica's stable owner id: the dispatch lease owner. */
  readonly replicaOwnerId: string;
  /** How long this replica holds the dispatch lease between claim and settlement. */
  readonly leaseDurationMs: number;
  readonly availability: DispatchAvailability;
  /** Observation only: it is not authority, and a throw from it changes nothing. */
  readonly observe?: (observation: DispatchObservation) => void;
  /** TEST ONLY, see DispatchControlTestHooks. */
  readonly testHooks?: DispatchControlTestHooks;
  /** Claims, settlements and stale fences for metrics (docs/decisions/0110); no authority either. */
  readonly observer?: Partial<DispatchObserver>;
}

/** A stop that could not be proved settled: the worker gets no stop, only this code. */
export class DispatchFailedClosed extends PidfenceError {
  constructor(code: DispatchFailureCode) {
    super(
      'the stop could not be recorded as dispatched on this replica; no stop was released. The worker retries its lease-control tick.',
      code,
    );
    this.name = 'DispatchFailedClosed';
  }
}

const FAIL_CLOSED_CLAIMS: Readonly<Record<string, DispatchFailureCode>> = {
  leased: 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED',
  not_due: 'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE',
  blocked: 'ERR_PIDFENCE_CLUSTER_DISPATCH_BLOCKED',
  attempt_conflict: 'ERR_PIDFENCE_CLUSTER_DISPATCH_CONFLICT',
};

/** Refusals that mean another replica is delivering (or will): they do not withdraw readiness. */
const HEALTHY_REFUSALS: ReadonlySet<DispatchFailureCode> = new Set([
  'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED',
  'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE',
]);

interface ValidConfig {
  readonly owner: string;
  readonly leaseDurationMs: number;
}

function validConfig(options: DispatchControlOptions): ValidConfig | null {
  try {
    return {
      owner: validateOwner(options.replicaOwnerId),
      leaseDurationMs: validateLeaseDurationMs(options.leaseDurationMs),
    };
  } catch {
    return null;
  }
}

export class CancellationDispatchControl {
  readonly #inner: LeaseControl;
  readonly #repository: DispatchRepository;
  readonly #availability: DispatchAvailability;
  readonly #config: ValidConfig | null;
  readonly #observe: (observation: DispatchObservation) => void;
  readonly #hooks: DispatchControlTestHooks;
  readonly #observer: DispatchObserver;

  /**
   * A bad owner id or lease duration does not throw here: renewals must keep flowing, so the
   * wrapper is built and every stop fails closed with ERR_PIDFENCE_CLUSTER_CONFIG instead.
   */
  constructor(inner: LeaseControl, repository: DispatchRepository, options: DispatchControlOptions) {
    this.#inner = inner;
    this.#repository = repository;
    this.#availability = options.availability;
    this.#config = validConfig(options);
    this.#observe = options.observe ?? (() => undefined);
    this.#hooks = options.testHooks ?? {};
    this.#observer = observerOf(options.observer);
    if (this.#config === null) this.#availability.withdraw('ERR_PIDFENCE_CLUSTER_CONFIG', true);
  }

  /** One lease: a page of one (docs/decisions/0200); a stop that cannot be proved settled throws DispatchFailedClosed. */
  async tick(caller: WorkerCaller, ref: LeaseRef): Promise<ControlledTickAnswer> {
    const page = await this.tickPage(caller, [ref]);
    const answer = page.answers.get(ref.runId) ?? { kind: 'renewed', expiresAtMs: page.expiresAtMs };
    if (answer.kind === 'unavailable') throw new DispatchFailedClosed(answer.code);
    return answer;
  }

  /**
   * Every lease of one worker (docs/decisions/0200): the lease page's answers, each stop claimed and
   * settled before it is released (design/cluster §D3), a page of claims and a page of settlements
   * for however many stops are due. A stop that cannot be proved settled is `unavailable` for that
   * lease alone; the others keep their answers.
   */
  async tickPage(caller: WorkerCaller, refs: readonly LeaseRef[]): Promise<ControlledTickPage> {
    const page = await this.#inner.tickPage(caller, refs);
    const answers = new Map<string, PageAnswer>();
    const stops: Array<{ readonly ref: LeaseRef; readonly stop: StopAnswer }> = [];
    for (const ref of refs) {
      const answer = page.answers.get(ref.runId);
      if (answer?.kind === 'stop_requested') stops.push({ ref, stop: answer });
      else this.#emit({ kind: 'bypass', code: null, scope: null });
      if (answer !== undefined && answer.kind !== 'stop_requested') answers.set(ref.runId, answer);
    }
    for (let i = 0; i < stops.length; i += DUE_PAGE_MAX) {
      for (const [runId, answer] of await this.#deliverStops(stops.slice(i, i + DUE_PAGE_MAX)))
        answers.set(runId, answer);
    }
    return { session: page.session, expiresAtMs: page.expiresAtMs, answers };
  }

  async #deliverStops(
    stops: ReadonlyArray<{ readonly ref: LeaseRef; readonly stop: StopAnswer }>,
  ): Promise<Map<string, PageAnswer>> {
    const answers = new Map<string, PageAnswer>();
    if (this.#config === null) {
      for (const { ref, stop } of stops)
        answers.set(ref.runId, this.#unavailable('ERR_PIDFENCE_CLUSTER_CONFIG', stop.scope));
      return answers;
    }
    const { owner, leaseDurationMs } = this.#config;
    const started = monotonicNow();
    const items = stops.map(({ ref, stop }) => ({
      runId: ref.runId,
      attemptId: ref.attemptId,
      cancelRequestedAtMs: stop.stopAtMs,
      token: createLeaseToken(),
    }));
    const claims = await this.#attempt(() => this.#repository.claimPage({ owner, leaseDurationMs, items }));
    if (claims === null) {
      for (const { ref, stop } of stops)
        answers.set(ref.runId, this.#unavailable('ERR_PIDFENCE_CLUSTER_DISPATCH_UNAVAILABLE', stop.scope));
      return answers;
    }
    const claimed: Array<{ readonly index: number; readonly claim: Extract<ClaimOutcome, { kind: 'claimed' }> }> = [];
    claims.forEach((claim, index) => {
      this.#observer.onClaim(claim.kind);
      const { ref, stop } = stops[index] as (typeof stops)[number];
      if (claim.kind === 'claimed') claimed.push({ index, claim });
      else answers.set(ref.runId, this.#answerForClaim(claim, stop));
    });
    if (claimed.length > 0) {
      await this.#hooks.afterClaim?.();
      for (const [runId, answer] of await this.#settle(stops, claimed, owner, started)) answers.set(runId, answer);
    }
    return answers;
  }

  /** Settles the claimed stops termination_requested, one page; only a durable settlement releases a stop. */
  async #settle(
    stops: ReadonlyArray<{ readonly ref: LeaseRef; readonly stop: StopAnswer }>,
    claimed: ReadonlyArray<{ readonly index: number; readonly claim: Extract<ClaimOutcome, { kind: 'claimed' }> }>,
    owner: string,
    started: bigint,
  ): Promise<Map<string, PageAnswer>> {
    const answers = new Map<string, PageAnswer>();
    const settled = await this.#attempt(() =>
      this.#repository.recordResults(
        claimed.map(({ index, claim }) => {
          const { ref } = stops[index] as (typeof stops)[number];
          return {
            runId: ref.runId,
            attemptId: ref.attemptId,
            owner,
            token: claim.token,
            expectedVersion: claim.record.version,
            result: 'termination_requested' as const,
            eventId: `evt-${randomUUID()}`,
          };
        }),
      ),
    );
    let released = false;
    claimed.forEach(({ index }, i) => {
      const { ref, stop } = stops[index] as (typeof stops)[number];
      const outcome = settled?.[i];
      if (outcome?.kind === 'stale_fence') this.#observer.onStaleFence();
      else if (outcome !== undefined) this.#observer.onSettled('termination_requested', secondsSince(started));
      const durable =
        outcome?.kind === 'recorded' &&
        outcome.record.status === 'dispatched' &&
        outcome.record.lastResult === 'termination_requested';
      if (durable) released = true;
      answers.set(
        ref.runId,
        durable
          ? this.#release(stop, 'dispatched', 'settled')
          : this.#unavailable('ERR_PIDFENCE_CLUSTER_SETTLE_FAILED', stop.scope),
      );
    });
    if (released) await this.#hooks.afterSettle?.();
    return answers;
  }

  #answerForClaim(claim: Exclude<ClaimOutcome, { kind: 'claimed' }>, stop: StopAnswer): PageAnswer {
    if (claim.kind === 'dispatched') return this.#release(stop, 'dispatched', 'replayed');
    // A task timeout or a terminal race: the stop is real, but no run cancellation fact exists to record.
    if (claim.kind === 'not_eligible') return this.#release(stop, 'untracked', 'untracked');
    return this.#unavailable(FAIL_CLOSED_CLAIMS[claim.kind] ?? 'ERR_PIDFENCE_CLUSTER_DISPATCH_CONFLICT', stop.scope);
  }

  async #attempt<T>(work: () => Promise<T>): Promise<T | null> {
    try {
      return await work();
    } catch {
      return null;
    }
  }

  #release(
    stop: StopAnswer,
    tracking: 'dispatched' | 'untracked',
    kind: DispatchObservation['kind'],
  ): ControlledTickAnswer {
    this.#availability.restore();
    this.#emit({ kind, code: null, scope: stop.scope });
    return { ...stop, tracking };
  }

  /**
   * A stop not released. Another replica's live dispatch lease or a retry not yet due is the
   * delivery working elsewhere, not this replica failing: readiness stays (docs/decisions/0202).
   */
  #unavailable(code: DispatchFailureCode, scope: 'run' | 'attempt'): PageAnswer {
    if (!HEALTHY_REFUSALS.has(code)) this.#availability.withdraw(code);
    this.#emit({ kind: 'failed_closed', code, scope });
    return { kind: 'unavailable', code };
  }

  #emit(observation: DispatchObservation): void {
    try {
      this.#observe(observation);
    } catch {
      // Observation is not authority (docs/decisions/0101): its failure never changes the answer.
    }
  }
}
