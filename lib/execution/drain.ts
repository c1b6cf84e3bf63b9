// Shutdown drain (design/execution §5), admission first: stop admitting, stop the one timer, consume the
// completions of this runner's active attempts, then write `shutdown` intent for those still
// running that have none (an existing user/policy/timeout reason is kept) and stop the exact
// processes through the dispatch path, a bounded number at once and none after the deadline; then
// converge their terminal states with the completion processor and close storage. Bounded by its
// deadline and idempotent; `timed_out` when it cannot converge, and storage is closed all the same.
// A full disk (docs/decisions/0191) is waited out, not given up on: the intent and the end are
// retried with backoff, and the deadline counts from the last time the store was found full.
import { isStoreFull, type PidfenceError } from '../base/errors';
import { delay, settlesWithin } from '../base/time';
import { monotonicMs } from '../native/index';
import type { DispatchOutcome, DispatchTarget } from '../dispatch/index';
import type { ExecutionStore } from '../store/execution-store';
import type { RunStore } from '../store/run-store';
import type { Admission } from './admission';
import type { CompletionOutcome, CompletionProcessor } from './completion-processor';
import type { ControlLifecycle } from './control-lifecycle';
import type { AttemptRef } from './notices';

export const DRAIN_TIMEOUT_DEFAULT_MS = 30_000;
/** How often the drain looks again at attempts it is waiting for (only while draining). */
export const DRAIN_RECHECK_MS = 50;
/** Retries of a stop whose store is full: from this, doubling, up to STORE_FULL_RETRY_MAX_MS (the launcher's receipt backoff). */
export const STORE_FULL_RETRY_MS = 50;
export const STORE_FULL_RETRY_MAX_MS = 5_000;

export interface DrainReport {
  readonly kind: 'drained' | 'timed_out';
  /** Attempts in scope that were active when the drain began. */
  readonly active: number;
  /** `shutdown` intent written now (the others kept their reason). */
  readonly shutdownRequested: number;
  readonly converged: number;
  readonly remaining: number;
  /** The active-attempt pages ran out of budget before the end of the source. */
  readonly pageBudgetExhausted: boolean;
}

export interface DrainOptions {
  readonly admission: Admission;
  readonly lifecycle: ControlLifecycle;
  readonly executionStore: ExecutionStore;
  readonly runStore: Pick<RunStore, 'requestCancellation'>;
  readonly dispatcher: { dispatch(target: DispatchTarget): Promise<DispatchOutcome> };
  readonly processor: CompletionProcessor;
  readonly pageSize: number;
  readonly pages: number;
  /** The runner whose attempts this drain stops (docs/decisions/0070); omitted: every one of the store. */
  readonly runnerId?: string;
  /** Stops in flight at once (a stop may wait out its whole grace period). */
  readonly concurrency: number;
  readonly closeStorage: () => Promise<void> | void;
  /** Every completion the drain committed (the lifecycle is stopped by then). */
  readonly onCompleted?: (ref: AttemptRef, outcome: CompletionOutcome) => void;
  readonly timeoutMs?: number;
  readonly clock?: () => number;
  /** The store was found full: told once per drain (a notice for a person), then retried by itself. */
  readonly onStoreFull?: (error: PidfenceError) => void;
  /**
   * A full disk moves the deadline on (the drain lasts until there is room, then its timeout): a
   * runner's drain. Off (a `cancel` that took over an orphan): the deadline stands.
   */
  readonly waitOutFullDisk?: boolean;
}

export class ExecutionDrain {
  readonly #options: DrainOptions;
  readonly #clock: () => number;
  #running: Promise<DrainReport> | null = null;
  /** Moved on while the store is full: a full disk is waited out, not counted against the drain. */
  #deadline = 0;
  #fullReported = false;
  /**
   * Attempts whose stop has not recorded its intent yet: not ended meanwhile, so that once the disk
   * has room again the intent is written before the end (a job KILLed by a second interrupt ends
   * `cancelled`, not `lost`).
   */
  readonly #intentPending = new Set<string>();

  constructor(options: DrainOptions) {
    this.#options = options;
    this.#clock = options.clock ?? monotonicMs;
  }

  /** Idempotent: every call returns the one drain's report. */
  drain(): Promise<DrainReport> {
    this.#running ??= this.#drain();
    return this.#running;
  }

  /** The store is full right now: the deadline starts again from here, and a person is told once. */
  #storeFull(error: PidfenceError): void {
    if (this.#options.waitOutFullDisk === true)
      this.#deadline = Math.max(this.#deadline, this.#clock() + (this.#options.timeoutMs ?? DRAIN_TIMEOUT_DEFAULT_MS));
    if (this.#fullReported) return;
    this.#fullReported = true;
    try {
      this.#options.onStoreFull?.(error);
    } catch {
      // a notice must not change the drain
    }
  }

  async #drain(): Promise<DrainReport> {
    const o = this.#options;
    this.#deadline = this.#clock() + (o.timeoutMs ?? DRAIN_TIMEOUT_DEFAULT_MS);
    const left = () => this.#deadline - this.#clock();
    try {
      await o.admission.close();
      await o.lifecycle.stop(Math.max(0, left()));
      const { targets, exhausted } = await this.#collect();
      // Completions before stops: a job that already ended is never stopped.
      const running = await this.#converge(targets);
      const counts = { shutdownRequested: 0 };
      const stops = this.#stopAll(running, counts);
      let remaining = running;
      for (;;) {
        remaining = await this.#converge(remaining);
        if (remaining.length === 0 || left() <= 0) break;
        await delay(Math.min(DRAIN_RECHECK_MS, left()));
      }
      // A stop still waiting out its grace is not waited for past the deadline.
      await settlesWithin(stops, left());
      const kind = remaining.length === 0 && !exhausted ? 'drained' : 'timed_out';
      return {
        kind,
        active: targets.length,
        shutdownRequested: counts.shutdownRequested,
        converged: targets.length - remaining.length,
        remaining: remaining.length,
        pageBudgetExhausted: exhausted,
      };
    } finally {
      await o.closeStorage();
    }
  }

  /** The attempts still active after one look each; completions are reported. A store failure keeps the attempt. */
  async #converge(refs: readonly AttemptRef[]): Promise<AttemptRef[]> {
    const next: AttemptRef[] = [];
    for (const ref of refs) {
      if (this.#intentPending.has(ref.attemptId)) {
        next.push(ref);
        continue;
      }
      let outcome;
      try {
        outcome = await this.#options.processor.process(ref);
      } catch (error) {
        // Its end could not be committed (a full disk, a store gone): looked at again next round.
        if (isStoreFull(error)) this.#storeFull(error as PidfenceError);
        next.push(ref);
        continue;
      }
      if (outcome.kind === 'completed') this.#options.onCompleted?.(ref, outcome);
      if (outcome.kind === 'active' || outcome.kind === 'unproven') next.push(ref);
    }
    return next;
  }

  /** At most `concurrency` stops at once; none begins after the deadline. Never rejects. */
  #stopAll(refs: readonly AttemptRef[], counts: { shutdownRequested: number }): Promise<void> {
    const queue = [...refs];
    const worker = async (): Promise<void> => {
      for (let ref = queue.shift(); ref !== undefined && this.#clock() < this.#deadline; ref = queue.shift()) {
        if (await this.#stopRetried(ref)) counts.shutdownRequested += 1;
      }
    };
    const workers = Array.from({ length: Math.min(this.#options.concurrency, refs.length) }, worker);
    return Promise.all(workers).then(() => undefined);
  }

  /**
   * One stop, retried with backoff while the store is full (no intent, no signal: durable intent
   * comes first); any other failure ends it: the dispatch lease expires and a later runner retries.
   */
  async #stopRetried(ref: AttemptRef): Promise<boolean> {
    this.#intentPending.add(ref.attemptId);
    try {
      for (let waitMs = STORE_FULL_RETRY_MS; ; waitMs = Math.min(STORE_FULL_RETRY_MAX_MS, waitMs * 2)) {
        try {
          return await this.#stop(ref);
        } catch (error) {
          if (!isStoreFull(error)) return false;
          this.#storeFull(error as PidfenceError);
          if (this.#clock() >= this.#deadline) return false;
          await delay(waitMs);
        }
      }
    } finally {
      this.#intentPending.delete(ref.attemptId);
    }
  }

  /** `shutdown` intent unless a reason exists (user/policy/timeout kept), then the exact stop. */
  async #stop(ref: AttemptRef): Promise<boolean> {
    const o = this.#options;
    const intent = await o.runStore.requestCancellation({
      runId: ref.runId,
      reason: 'shutdown',
      eventId: `evt-drain-${ref.attemptId}`.slice(0, 128),
    });
    this.#intentPending.delete(ref.attemptId);
    if (intent.kind !== 'requested' && intent.kind !== 'already_requested') return false;
    const cancelRequestedAtMs = intent.run.cancelRequestedAtMs;
    // Durable intent exists: only now may the exact process be stopped (same path as a user cancel).
    if (cancelRequestedAtMs !== null)
      await o.dispatcher.dispatch({ runId: ref.runId, attemptId: ref.attemptId, cancelRequestedAtMs });
    return intent.kind === 'requested';
  }

  async #collect(): Promise<{ targets: AttemptRef[]; exhausted: boolean }> {
    const o = this.#options;
    const targets: AttemptRef[] = [];
    let after: { runId: string } | null = null;
    for (let pages = 0; pages < o.pages; pages += 1) {
      const page = await o.executionStore.activeAttemptsPage({
        limit: o.pageSize,
        ...(after === null ? {} : { after }),
        ...(o.runnerId === undefined ? {} : { runnerId: o.runnerId }),
      });
      for (const item of page.items) targets.push({ runId: item.runId, attemptId: item.attemptId });
      if (page.next === null) return { targets, exhausted: false };
      after = page.next;
    }
    return { targets, exhausted: true };
  }
}
