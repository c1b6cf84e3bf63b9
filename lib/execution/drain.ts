// Shutdown drain (ADR-0072 §5), admission first: stop admitting, stop the one timer, write
// `shutdown` intent for the active attempts in scope that have none (an existing user/policy/timeout
// reason is kept), stop the exact processes through the dispatch path, converge their terminal
// states with the completion processor, then close storage. Bounded and idempotent; `timed_out`
// when it cannot converge, and storage is closed all the same.
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

export interface DrainReport {
  readonly outcome: 'drained' | 'timed_out';
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
  /** Which active attempts belong to this application: all of the store's, or only these. */
  readonly inScope: (ref: AttemptRef) => boolean;
  readonly closeStorage: () => Promise<void> | void;
  /** Every completion the drain committed (the lifecycle is stopped by then). */
  readonly onCompleted?: (ref: AttemptRef, outcome: CompletionOutcome) => void;
  readonly timeoutMs?: number;
  readonly clock?: () => number;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class ExecutionDrain {
  readonly #options: DrainOptions;
  #running: Promise<DrainReport> | null = null;

  constructor(options: DrainOptions) {
    this.#options = options;
  }

  /** Idempotent: every call returns the one drain's report. */
  drain(): Promise<DrainReport> {
    this.#running ??= this.#drain();
    return this.#running;
  }

  async #drain(): Promise<DrainReport> {
    const o = this.#options;
    const clock = o.clock ?? Date.now;
    const deadline = clock() + (o.timeoutMs ?? DRAIN_TIMEOUT_DEFAULT_MS);
    try {
      await o.admission.close();
      await o.lifecycle.stop(Math.max(0, deadline - clock()));
      const { targets, exhausted } = await this.#collect();
      let shutdownRequested = 0;
      const waiting: AttemptRef[] = [];
      for (const ref of targets) {
        const intent = await o.runStore.requestCancellation({ runId: ref.runId, reason: 'shutdown', eventId: `evt-drain-${ref.attemptId}`.slice(0, 128) });
        if (intent.kind === 'requested') shutdownRequested += 1;
        waiting.push(ref);
        if (intent.kind !== 'requested' && intent.kind !== 'already_requested') continue;
        const cancelRequestedAtMs = intent.run.cancelRequestedAtMs;
        // Durable intent exists: only now may the exact process be stopped (same path as a user cancel).
        if (cancelRequestedAtMs !== null) await o.dispatcher.dispatch({ runId: ref.runId, attemptId: ref.attemptId, cancelRequestedAtMs });
      }
      let remaining = waiting;
      for (;;) {
        const next: AttemptRef[] = [];
        for (const ref of remaining) {
          const outcome = await o.processor.process(ref);
          if (outcome.kind === 'completed') o.onCompleted?.(ref, outcome);
          if (outcome.kind === 'active' || outcome.kind === 'unproven') next.push(ref);
        }
        remaining = next;
        const left = deadline - clock();
        if (remaining.length === 0 || left <= 0) break;
        await delay(Math.min(DRAIN_RECHECK_MS, left));
      }
      const outcome = remaining.length === 0 && !exhausted ? 'drained' : 'timed_out';
      return { outcome, active: targets.length, shutdownRequested, converged: targets.length - remaining.length, remaining: remaining.length, pageBudgetExhausted: exhausted };
    } finally {
      await o.closeStorage();
    }
  }

  async #collect(): Promise<{ targets: AttemptRef[]; exhausted: boolean }> {
    const o = this.#options;
    const targets: AttemptRef[] = [];
    let after: { runId: string } | null = null;
    for (let pages = 0; pages < o.pages; pages += 1) {
      const page = await o.executionStore.activeAttemptsPage(after === null ? { limit: o.pageSize } : { limit: o.pageSize, after });
      for (const item of page.items) if (o.inScope(item)) targets.push({ runId: item.runId, attemptId: item.attemptId });
      if (page.next === null) return { targets, exhausted: false };
      after = page.next;
    }
    return { targets, exhausted: true };
  }
}
