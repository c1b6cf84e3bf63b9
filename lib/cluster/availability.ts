// Readiness of one control-plane replica for the dispatch path (docs/decisions/0101): a fail-closed
// stop withdraws it for a bounded hold (one dispatch lease, the time another replica's lease or a
// retry needs to run out), and the next successful stop settlement restores it at once. Only fixed
// codes are kept: no run, worker, attempt, token or database text.
export type DispatchFailureCode =
  | 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED'
  | 'ERR_PIDFENCE_CLUSTER_DISPATCH_NOT_DUE'
  | 'ERR_PIDFENCE_CLUSTER_DISPATCH_BLOCKED'
  | 'ERR_PIDFENCE_CLUSTER_DISPATCH_CONFLICT'
  | 'ERR_PIDFENCE_CLUSTER_SETTLE_FAILED'
  | 'ERR_PIDFENCE_CLUSTER_DISPATCH_UNAVAILABLE'
  | 'ERR_PIDFENCE_CLUSTER_CONFIG';

export interface AvailabilityState {
  readonly ready: boolean;
  /** The code of the failure that withdrew readiness, while withdrawn. */
  readonly code: DispatchFailureCode | null;
}

export class DispatchAvailability {
  readonly #holdMs: number;
  readonly #now: () => number;
  #withdrawnUntil = 0;
  #code: DispatchFailureCode | null = null;
  #permanent = false;

  /** `now` is a local monotonic-enough clock for the hold only; no dispatch decision reads it. */
  constructor(holdMs: number, now: () => number = () => performance.now()) {
    this.#holdMs = holdMs;
    this.#now = now;
  }

  /** `permanent`: a configuration failure, which no later success can mend (restart with a fixed configuration). */
  withdraw(code: DispatchFailureCode, permanent = false): void {
    if (this.#permanent) return;
    this.#permanent = permanent;
    this.#code = code;
    this.#withdrawnUntil = this.#now() + this.#holdMs;
  }

  restore(): void {
    if (this.#permanent) return;
    this.#code = null;
    this.#withdrawnUntil = 0;
  }

  state(): AvailabilityState {
    if (this.#code !== null && !this.#permanent && this.#now() >= this.#withdrawnUntil) this.restore();
    return { ready: this.#code === null, code: this.#code };
  }
}
