// LocalExecutionControlLifecycle (design/execution §4): the application's one periodic timer. Each serial,
// non-overlapping cycle first consumes completions (the notices, one page of this runner's active
// attempts, the attempts it watches for its caller), then turns one page of due deadlines into
// durable timeout intent, then runs one dispatch cycle (cancellations → exact stops), and every
// cleanup period one page of the receipt journal and one adoption pass. Completions come before
// stops, so a job that ended is never stopped. No per-task timer, watcher or directory scan; every
// page, wait and notice set is bounded.
import { PidfenceError } from '../base/errors';
import { CycleTimer, type CycleTimerState, type Profile } from '../dispatch/index';
import { RateLimitedDiagnostics, diagnosticCode, reportControllerFailures, type DiagnosticsCallback, type FailureFacts } from '../dispatch/diagnostics';
import type { ExecutionStore } from '../store/execution-store';
import type { ActiveCursor } from '../contract/index';
import type { CompletionOutcome, CompletionProcessor } from './completion-processor';
import type { DeadlineSource } from './deadlines';
import type { CompletionNotices } from './notices';
import { deleteReceipt, quarantineReceipt } from './receipts';

/** Consecutive failed cycles after which the lifecycle reports itself failed (onFatal). */
export const CYCLE_FAILURE_LIMIT = 3;
export const LIFECYCLE_STOP_TIMEOUT_MS = 10_000;

export interface ControlCycleReport {
  readonly notices: number;
  readonly deadlines: number;
  readonly dispatched: number;
  readonly active: number;
  readonly completed: number;
  readonly cleaned: number;
}

export interface ControlLifecycleOptions {
  readonly profile: Profile;
  readonly executionStore: ExecutionStore;
  readonly processor: CompletionProcessor;
  readonly deadlines: DeadlineSource;
  /** The dispatch path (a Supervisor): one bounded cycle of due cancellations. */
  readonly dispatch: { runCycle(): Promise<{ readonly dispatched: number; readonly controllerFailures?: readonly FailureFacts[] }> };
  readonly notices: CompletionNotices;
  readonly receiptDirectory: string;
  readonly diagnostics?: DiagnosticsCallback;
  /** After CYCLE_FAILURE_LIMIT consecutive failed cycles (a store gone, readiness lost). */
  readonly onFatal?: (code: string) => void;
  /** Every completion the lifecycle committed (low-sensitivity). */
  readonly onCompleted?: (ref: { readonly runId: string; readonly attemptId: string }, outcome: CompletionOutcome) => void;
  /** After every completed control cycle (a status line, a metric); counts only. */
  readonly onCycle?: (report: ControlCycleReport) => void;
  /** Keep the process alive on the timer (a long-lived supervisor); default false (unref'd). */
  readonly keepAlive?: boolean;
  /** Only this runner's active attempts (docs/decisions/0070); omitted: every one of the store. */
  readonly runnerId?: string;
  /**
   * Attempts the caller waits for (a foreground `run`): looked at every cycle, so the caller learns
   * of their end even when it left the active page before this runner saw it.
   */
  readonly watched?: () => Iterable<{ readonly runId: string; readonly attemptId: string }>;
  /** Every cleanup period: take over attempts of runners of this host proved gone. */
  readonly adopt?: () => Promise<number>;
  readonly clock?: () => number;
}

export type LifecycleState = CycleTimerState;

export class ControlLifecycle {
  readonly #options: ControlLifecycleOptions;
  readonly #diagnostics: RateLimitedDiagnostics;
  readonly #clock: () => number;
  readonly #timer: CycleTimer;
  #activeCursor: ActiveCursor | null = null;
  #lastCleanupMs = -Infinity;
  #failures = 0;
  #cycles = 0;

  constructor(options: ControlLifecycleOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    this.#diagnostics = new RateLimitedDiagnostics(options.diagnostics, 6);
    this.#timer = new CycleTimer({
      cycle: () => this.#timedCycle(),
      // Notices that arrived during a cycle are taken by the next one at once.
      nextDelayMs: () => (options.notices.size > 0 ? 0 : options.profile.periodMs),
      ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    });
    // A notice pulls the one timer forward instead of adding another.
    options.notices.onNotice = () => this.#timer.pullForward();
  }

  get state(): LifecycleState {
    return this.#timer.state;
  }

  get cycles(): number {
    return this.#cycles;
  }

  /** Creates the one timer; the first cycle runs at once (recovery continues where startup left). */
  start(): void {
    if (this.#timer.state !== 'stopped' || this.#timer.cycleRunning) {
      throw new PidfenceError('the execution lifecycle is already started or still draining a cycle; call stop() first.', 'ERR_PIDFENCE_LIFECYCLE_STARTED');
    }
    this.#timer.start(0);
  }

  /** Idempotent: cancels the timer and waits (bounded) for a running cycle. */
  stop(timeoutMs = LIFECYCLE_STOP_TIMEOUT_MS): Promise<{ drained: boolean }> {
    return this.#timer.stop(timeoutMs);
  }

  /** One control cycle now (tests, drain, the CLI's first pass); never overlaps a timer cycle. */
  runCycle(): Promise<ControlCycleReport> {
    return this.#timer.runExclusive(() => this.#cycle());
  }

  /** A timed cycle: reported to onCycle, or counted towards onFatal; never rejects. */
  async #timedCycle(): Promise<void> {
    try {
      const report = await this.#cycle();
      this.#failures = 0;
      try {
        this.#options.onCycle?.(report);
      } catch {
        // an observer must not stop the lifecycle
      }
    } catch (error) {
      const code = diagnosticCode(error);
      this.#diagnostics.report(code);
      this.#failures += 1;
      if (this.#failures >= CYCLE_FAILURE_LIMIT) this.#options.onFatal?.(code);
    }
  }

  async #cycle(): Promise<ControlCycleReport> {
    this.#cycles += 1;
    const { processor, notices } = this.#options;
    let completed = 0;
    const noticed = notices.take();
    for (const ref of noticed) completed += this.#report(ref, await processor.process(ref));
    const page = await this.#activePage();
    for (const item of page.items) completed += this.#report(item, await processor.process(item));
    // Watched attempts the page just looked at need no second look this cycle.
    const looked = new Set(page.items.map((item) => item.attemptId));
    for (const ref of [...(this.#options.watched?.() ?? [])]) {
      if (!looked.has(ref.attemptId)) completed += this.#report(ref, await processor.process(ref));
    }
    const deadlines = await this.#options.deadlines.runPage();
    const dispatch = await this.#options.dispatch.runCycle();
    reportControllerFailures(this.#diagnostics, dispatch);
    const cleaned = await this.#cleanupIfDue();
    return { notices: noticed.length, deadlines: deadlines.requested, dispatched: dispatch.dispatched, active: page.items.length, completed, cleaned };
  }

  async #activePage(): Promise<{ readonly items: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }> }> {
    const { profile, runnerId } = this.#options;
    const page = await this.#options.executionStore.activeAttemptsPage({
      limit: profile.pageSize, ...(this.#activeCursor === null ? {} : { after: this.#activeCursor }), ...(runnerId === undefined ? {} : { runnerId }),
    });
    this.#activeCursor = page.next;
    return page;
  }

  #report(ref: { readonly runId: string; readonly attemptId: string }, outcome: CompletionOutcome): number {
    if (outcome.kind !== 'completed' && outcome.kind !== 'terminal') return 0;
    try {
      this.#options.onCompleted?.({ runId: ref.runId, attemptId: ref.attemptId }, outcome);
    } catch {
      // a throwing observer must not stop the lifecycle
    }
    return 1;
  }

  /** Low-frequency: one page of open journal rows, each file action done at its exact path. */
  async #cleanupIfDue(): Promise<number> {
    const now = this.#clock();
    if (now - this.#lastCleanupMs < this.#options.profile.cleanupPeriodMs) return 0;
    this.#lastCleanupMs = now;
    await this.#options.adopt?.();
    return cleanupJournalPage(this.#options.executionStore, this.#options.receiptDirectory, this.#options.profile.cleanupPage);
  }
}

/** Finishes journalled file actions (a crash between commit and delete, or intent and move). */
export async function cleanupJournalPage(store: ExecutionStore, receiptDirectory: string, limit: number): Promise<number> {
  const page = await store.openJournalPage({ limit });
  for (const entry of page.items) {
    if (entry.action === 'delete') deleteReceipt(receiptDirectory, entry.attemptId);
    else quarantineReceipt(receiptDirectory, entry.attemptId);
    await store.closeJournalEntry({ attemptId: entry.attemptId, action: entry.action });
  }
  return page.items.length;
}
