// The cancellation wrapper around the worker's lease-control tick (docs/decisions/0101; design/cluster).
// The worker's authenticated tick stays the only trigger: no scanner, timer or queue here. A stop
// reaches the worker only after its dispatch is durably settled `termination_requested` with its
// `run.cancel_dispatched` event; anything that cannot prove that fails closed.
import { randomUUID } from 'node:crypto';

import { monotonicNow, secondsSince } from '../base/time';
import { PidfenceError } from '../base/errors';
import { createLeaseToken, validateLeaseDurationMs, validateOwner } from '../contract/index';
import { observerOf, type DispatchObserver } from '../dispatch/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { DispatchAvailability, DispatchFailureCode } from './availability';
import type { LeaseRef, LeaseTickAnswer, WorkerCaller } from './lease-store';

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

export interface LeaseControl {
  tick(caller: WorkerCaller, ref: LeaseRef): Promise<LeaseTickAnswer>;
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
    super('the stop could not be recorded as dispatched on this replica; no stop was released. The worker retries its lease-control tick.', code);
    this.name = 'DispatchFailedClosed';
  }
}

const FAIL_CLOSED_CLAIMS: Readonly<Record<string, DispatchFailureCode>> = {
  leased: 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED',
  not_due: 'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE',
  blocked: 'ERR_PIDFENCE_CLUSTER_DISPATCH_BLOCKED',
  attempt_conflict: 'ERR_PIDFENCE_CLUSTER_DISPATCH_CONFLICT',
};

interface ValidConfig {
  readonly owner: string;
  readonly leaseDurationMs: number;
}

function validConfig(options: DispatchControlOptions): ValidConfig | null {
  try {
    return { owner: validateOwner(options.replicaOwnerId), leaseDurationMs: validateLeaseDurationMs(options.leaseDurationMs) };
  } catch {
    return null;
  }
}

export class CancellationDispatchControl implements LeaseControl {
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

  async tick(caller: WorkerCaller, ref: LeaseRef): Promise<ControlledTickAnswer> {
    const answer = await this.#inner.tick(caller, ref);
    if (answer.kind !== 'stop_requested') {
      this.#emit({ kind: 'bypass', code: null, scope: null });
      return answer;
    }
    return this.#deliverStop(ref, answer);
  }

  async #deliverStop(ref: LeaseRef, stop: Extract<LeaseTickAnswer, { kind: 'stop_requested' }>): Promise<ControlledTickAnswer> {
    if (this.#config === null) throw this.#failClosed('ERR_PIDFENCE_CLUSTER_CONFIG', stop.scope);
    const { owner, leaseDurationMs } = this.#config;
    const started = monotonicNow();
    const claim = await this.#guard(stop.scope, 'ERR_PIDFENCE_CLUSTER_DISPATCH_UNAVAILABLE', () => this.#repository.claim({
      runId: ref.runId, attemptId: ref.attemptId, cancelRequestedAtMs: stop.stopAtMs, owner, token: createLeaseToken(), leaseDurationMs,
    }));
    this.#observer.onClaim(claim.kind);
    switch (claim.kind) {
      case 'claimed': {
        await this.#hooks.afterClaim?.();
        const settled = await this.#guard(stop.scope, 'ERR_PIDFENCE_CLUSTER_SETTLE_FAILED', () => this.#repository.recordResult({
          runId: ref.runId, attemptId: ref.attemptId, owner, token: claim.token, expectedVersion: claim.record.version,
          result: 'termination_requested', eventId: `evt-${randomUUID()}`,
        }));
        // Nothing here waits between the two transactions: the time is the claim and the settlement.
        if (settled.kind === 'stale_fence') this.#observer.onStaleFence();
        else this.#observer.onSettled('termination_requested', secondsSince(started));
        const durable = settled.kind === 'recorded' && settled.record.status === 'dispatched' && settled.record.lastResult === 'termination_requested';
        if (!durable) throw this.#failClosed('ERR_PIDFENCE_CLUSTER_SETTLE_FAILED', stop.scope);
        await this.#hooks.afterSettle?.();
        return this.#release(stop, 'dispatched', 'settled');
      }
      case 'dispatched':
        return this.#release(stop, 'dispatched', 'replayed');
      case 'not_eligible':
        // A task timeout or a terminal race: the stop is real, but no run cancellation fact exists to record.
        return this.#release(stop, 'untracked', 'untracked');
      default:
        throw this.#failClosed(FAIL_CLOSED_CLAIMS[claim.kind] ?? 'ERR_PIDFENCE_CLUSTER_DISPATCH_CONFLICT', stop.scope);
    }
  }

  async #guard<T>(scope: 'run' | 'attempt', code: DispatchFailureCode, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch {
      throw this.#failClosed(code, scope);
    }
  }

  #release(stop: Extract<LeaseTickAnswer, { kind: 'stop_requested' }>, tracking: 'dispatched' | 'untracked', kind: DispatchObservation['kind']): ControlledTickAnswer {
    this.#availability.restore();
    this.#emit({ kind, code: null, scope: stop.scope });
    return { ...stop, tracking };
  }

  #failClosed(code: DispatchFailureCode, scope: 'run' | 'attempt'): DispatchFailedClosed {
    this.#availability.withdraw(code);
    this.#emit({ kind: 'failed_closed', code, scope });
    return new DispatchFailedClosed(code);
  }

  #emit(observation: DispatchObservation): void {
    try {
      this.#observe(observation);
    } catch {
      // Observation is not authority (docs/decisions/0101): its failure never changes the answer.
    }
  }
}
