// LocalExecutionControlLifecycle (design/execution §4): the application's cycles on the one loop of the
// package (LifecycleRunner, docs/decisions/0210), with its one timer. Each serial,
// non-overlapping cycle consumes the completion notices, turns one page of due deadlines into
// durable timeout intent, runs one dispatch cycle (cancellations → exact stops; each stop consumes
// its target's completion first, so a job that ended is never stopped), then, once per control
// period, consumes completions from one page of this runner's active attempts and the attempts it
// watches for its caller, and every cleanup period one page of the receipt journal and one adoption
// pass. Stops come before the active page so a woken cycle reaches a cancel without reading the page
// first (docs/decisions/0211); a woken cycle sooner than the period leaves that page, the backstop
// for a lost notice, to the period (docs/decisions/0435).
// No per-task timer, watcher or directory scan; every page, wait and notice set is bounded. A full
// disk (docs/decisions/0191) is no failure of the lifecycle: its cycles go on, further apart, until
// there is room again.
import { isStoreFull, PidfenceError } from '../base/errors';
import { LifecycleRunner, type Profile, type RunnerState } from '../dispatch/index';
import {
  RateLimitedDiagnostics,
  diagnosticCode,
  reportControllerFailures,
  type DiagnosticsCallback,
  type FailureFacts,
} from '../dispatch/diagnostics';
import { monotonicMs } from '../native/index';
import type { ExecutionStore } from '../store/execution-store';
import type { ActiveCursor } from '../contract/index';
import type { CompletionOutcome, CompletionProcessor } from './completion-processor';
import type { DeadlineSource } from './deadlines';
import type { AttemptRef, CompletionNotices } from './notices';
import { deleteReceipt, quarantineReceipt } from './receipts';

/** Consecutive failed cycles after which the lifecycle reports itself failed (onFatal). */
export const CYCLE_FAILURE_LIMIT = 3;
/** While the store is full the cadence doubles from the profile's period up to this. */
export const STORE_FULL_CYCLE_MAX_MS = 5_000;
export const LIFECYCLE_STOP_TIMEOUT_MS = 10_000;
/** A cadence cycle's timer may fire this much before a full period by the boot clock; it still looks. */
const BACKSTOP_SLACK_MS = 10;

export interface ControlCycleReport {
  readonly notices: number;
  readonly deadlines: number;
  readonly dispatched: number;
  /** The active page's size; null: a woken cycle left the page to the period (docs/decisions/0435). */
  readonly active: number | null;
  readonly completed: number;
  readonly cleaned: number;
}

export interface ControlLifecycleOptions {
  readonly profile: Profile;
  readonly executionStore: ExecutionStore;
  readonly processor: CompletionProcessor;
  readonly deadlines: DeadlineSource;
  /** The dispatch path (a Supervisor): one bounded cycle of due cancellations. */
  readonly dispatch: {
    runCycle(): Promise<{ readonly dispatched: number; readonly controllerFailures?: readonly FailureFacts[] }>;
  };
  readonly notices: CompletionNotices;
  readonly receiptDirectory: string;
  readonly diagnostics?: DiagnosticsCallback;
  /** After CYCLE_FAILURE_LIMIT consecutive failed cycles (a store gone, readiness lost). */
  readonly onFatal?: (code: string) => void;
  /** Every completion the lifecycle committed (low-sensitivity). */
  readonly onCompleted?: (
    ref: { readonly runId: string; readonly attemptId: string },
    outcome: CompletionOutcome,
  ) => void;
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
  /**
   * Whether an attempt's end will be noticed without a look: its launcher was spawned by this process
   * and has not exited (docs/decisions/0439). The period's backstop passes over such attempts.
   */
  readonly endWillBeNoticed?: (attemptId: string) => boolean;
  /** Every cleanup period: take over attempts of runners of this host proved gone. */
  readonly adopt?: () => Promise<number>;
  /** Every cleanup period: one page of ended attempts' empty job cgroups removed (docs/decisions/0300). */
  readonly sweepJobCgroups?: () => Promise<number>;
  readonly clock?: () => number;
  /** A cycle found the store full: told once per full spell (a notice for a person); the cycles go on. */
  readonly onStoreFull?: (error: PidfenceError) => void;
}

export type LifecycleState = RunnerState;

export class ControlLifecycle {
  readonly #options: ControlLifecycleOptions;
  readonly #diagnostics: RateLimitedDiagnostics;
  readonly #clock: () => number;
  readonly #runner: LifecycleRunner;
  #activeCursor: ActiveCursor | null = null;
  #lastCleanupMs = -Infinity;
  /** When the active page and the watched attempts were last looked at (docs/decisions/0435). */
  #lastBackstopMs = -Infinity;
  #failures = 0;
  #cycles = 0;
  #wakeUps = 0;
  /** This runner's next deadline or retry as read at the start of the last cycle (docs/decisions/0176). */
  #nextDue: { readonly inMs: number; readonly readAtMs: number } | null = null;
  /** Consecutive cycles that found the store full (0: it is not). */
  #fullCycles = 0;

  constructor(options: ControlLifecycleOptions) {
    this.#options = options;
    this.#clock = options.clock ?? monotonicMs;
    this.#diagnostics = new RateLimitedDiagnostics(options.diagnostics, 6);
    // The profile's cadence, or sooner: the next due deadline or retry, or a wake-up.
    this.#runner = new LifecycleRunner({
      supervisor: { runCycle: () => this.#timedCycle() },
      cadenceMs: options.profile.periodMs,
      stopTimeoutMs: LIFECYCLE_STOP_TIMEOUT_MS,
      nextDueInMs: () => this.#untilNextDueMs(),
      // While the store is full the cadence backs off (docs/decisions/0191).
      cadenceNowMs: () => this.#periodMs(),
      ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    });
    // A notice is a wake-up: it moves the one timer instead of adding another.
    options.notices.onNotice = () => this.#runner.wake();
  }

  get state(): LifecycleState {
    return this.#runner.state;
  }

  get cycles(): number {
    return this.#cycles;
  }

  /** Wake-ups received through wake() (coalesced ones included, completion notices not); counts only. */
  get wakeUps(): number {
    return this.#wakeUps;
  }

  /**
   * "Look now" (a committed cancel elsewhere, a new admission): the next cycle runs at once, or
   * right after the running one. Coalesced: any number of wake-ups before a cycle starts make one.
   */
  wake(): void {
    this.#wakeUps += 1;
    this.#runner.wake();
  }

  /** Creates the one timer; the first cycle runs at once (recovery continues where startup left). */
  start(): void {
    if (this.#runner.state !== 'stopped' || this.#runner.cycleRunning) {
      throw new PidfenceError(
        'the execution lifecycle is already started or still draining a cycle; call stop() first.',
        'ERR_PIDFENCE_LIFECYCLE_STARTED',
      );
    }
    this.#runner.start();
  }

  /** Idempotent: cancels the timer and waits (bounded) for a running cycle. */
  stop(timeoutMs = LIFECYCLE_STOP_TIMEOUT_MS): Promise<{ drained: boolean }> {
    return this.#runner.stop(timeoutMs);
  }

  /** One control cycle now (tests, drain, the CLI's first pass); never overlaps a timer cycle. */
  runCycle(): Promise<ControlCycleReport> {
    return this.#runner.runNow(() => this.#cycle({ backstop: true }));
  }

  /** A timed cycle: reported to onCycle, or counted towards onFatal (a full store is not); never rejects. */
  async #timedCycle(): Promise<void> {
    try {
      const report = await this.#cycle({ backstop: this.#backstopDue() });
      this.#failures = 0;
      this.#fullCycles = 0;
      try {
        this.#options.onCycle?.(report);
      } catch {
        // an observer must not stop the lifecycle
      }
    } catch (error) {
      const code = diagnosticCode(error);
      this.#diagnostics.report(code);
      if (isStoreFull(error)) {
        this.#storeFull(error as PidfenceError);
        return;
      }
      this.#failures += 1;
      if (this.#failures >= CYCLE_FAILURE_LIMIT) this.#options.onFatal?.(code);
    }
  }

  /** Retried on a longer cadence; a person is told once per full spell. */
  #storeFull(error: PidfenceError): void {
    this.#fullCycles += 1;
    if (this.#fullCycles > 1) return;
    try {
      this.#options.onStoreFull?.(error);
    } catch {
      // a notice must not stop the lifecycle
    }
  }

  /** The profile's period; while the store is full, doubled per full cycle up to STORE_FULL_CYCLE_MAX_MS. */
  #periodMs(): number {
    const { periodMs } = this.#options.profile;
    if (this.#fullCycles === 0) return periodMs;
    return Math.max(periodMs, Math.min(STORE_FULL_CYCLE_MAX_MS, periodMs * 2 ** Math.min(this.#fullCycles - 1, 16)));
  }

  /**
   * The backstop looks once per control period: a cycle the cadence starts comes at least a period
   * after the one before, so it looks; one woken sooner (a notice per ended job in a mass stop, a
   * cancel) does not (docs/decisions/0435).
   */
  #backstopDue(): boolean {
    return this.#clock() - this.#lastBackstopMs >= this.#options.profile.periodMs - BACKSTOP_SLACK_MS;
  }

  async #cycle(options: { readonly backstop: boolean }): Promise<ControlCycleReport> {
    this.#cycles += 1;
    // Read before the pages: what is due by now is theirs, what falls due later arms the timer.
    const nextDueInMs = await this.#options.deadlines.nextDueInMs();
    this.#nextDue = nextDueInMs === null ? null : { inMs: nextDueInMs, readAtMs: this.#clock() };
    const { processor, notices } = this.#options;
    let completed = 0;
    // Each group of looks commits the ends it found together (docs/decisions/0431).
    const hear = (ref: AttemptRef, outcome: CompletionOutcome): void => {
      completed += this.#report(ref, outcome);
    };
    const noticed = notices.take();
    await processor.processPage(noticed, hear);
    const deadlines = await this.#options.deadlines.runPage();
    const dispatch = await this.#options.dispatch.runCycle();
    reportControllerFailures(this.#diagnostics, dispatch);
    const active = options.backstop ? await this.#backstop(hear) : null;
    const cleaned = await this.#cleanupIfDue();
    return {
      notices: noticed.length,
      deadlines: deadlines.requested,
      dispatched: dispatch.dispatched,
      active,
      completed,
      cleaned,
    };
  }

  /** Time left until the next due deadline or retry, on the boot clock (docs/decisions/0160); null: none known. */
  #untilNextDueMs(): number | null {
    if (this.#nextDue === null) return null;
    return Math.max(0, this.#nextDue.inMs - (this.#clock() - this.#nextDue.readAtMs));
  }

  /**
   * One page of this runner's active attempts and every watched one, looked at together, except those
   * whose end a launcher's exit will bring as a notice (docs/decisions/0439); answers the page's size.
   */
  async #backstop(hear: (ref: AttemptRef, outcome: CompletionOutcome) => void): Promise<number> {
    this.#lastBackstopMs = this.#clock();
    const page = await this.#activePage();
    // Watched attempts the page looks at need no second look this cycle.
    const looked = new Set(page.items.map((item) => item.attemptId));
    const watched = [...(this.#options.watched?.() ?? [])].filter((ref) => !looked.has(ref.attemptId));
    const noticed = this.#options.endWillBeNoticed ?? (() => false);
    const unnoticed = [...page.items, ...watched].filter((ref) => !noticed(ref.attemptId));
    await this.#options.processor.processPage(unnoticed, hear);
    return page.items.length;
  }

  async #activePage(): Promise<{
    readonly items: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }>;
  }> {
    const { profile, runnerId } = this.#options;
    const page = await this.#options.executionStore.activeAttemptsPage({
      limit: profile.pageSize,
      ...(this.#activeCursor === null ? {} : { after: this.#activeCursor }),
      ...(runnerId === undefined ? {} : { runnerId }),
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
    await this.#options.sweepJobCgroups?.();
    return cleanupJournalPage(
      this.#options.executionStore,
      this.#options.receiptDirectory,
      this.#options.profile.cleanupPage,
    );
  }
}

/** Finishes journalled file actions (a crash between commit and delete, or intent and move). */
export async function cleanupJournalPage(
  store: ExecutionStore,
  receiptDirectory: string,
  limit: number,
): Promise<number> {
  const page = await store.openJournalPage({ limit });
  for (const entry of page.items) {
    if (entry.action === 'delete') deleteReceipt(receiptDirectory, entry.attemptId);
    else quarantineReceipt(receiptDirectory, entry.attemptId);
    await store.closeJournalEntry({ attemptId: entry.attemptId, action: entry.action });
  }
  return page.items.length;
}
