// LifecycleRunner (design/dispatch §2.6, design/execution §4): the one periodic loop of the package,
// used by the dispatch supervisor and by the execution control lifecycle alike (docs/decisions/0032,
// 0210). Explicit start()/stop(); one timer, created only by start(), unref'd unless asked, re-armed
// only after a cycle ended, for the earlier of the cadence and the next due item; a wake-up runs the
// next cycle now (coalesced); errors and controller failures go to bounded diagnostics; stop() is
// bounded and idempotent, and a cycle that outlived it never revives the loop.
import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { validateBoundedInteger } from '../contract/index';
import {
  DIAGNOSTICS_PER_MINUTE_DEFAULT,
  DIAGNOSTICS_PER_MINUTE_MAX,
  RateLimitedDiagnostics,
  diagnosticCode,
  reportControllerFailures,
  type DiagnosticsCallback,
} from './diagnostics';
import { RunnerDrainingError } from './errors';

/** Fastest cadence: a cluster replica polling more often than this only burns the database. */
export const CADENCE_MIN_MS = 100;
/** Slowest cadence: a cancellation never waits more than an hour for its first look. */
export const CADENCE_MAX_MS = 60 * 60 * 1000;
export const STOP_TIMEOUT_DEFAULT_MS = 5_000;
/** stop() never waits longer than this for a running cycle. */
export const STOP_TIMEOUT_MAX_MS = 60_000;

export interface LifecycleRunnerOptions {
  /** Anything with one bounded cycle per call, normally a Supervisor (whose controller failures are reported too). */
  readonly supervisor: { runCycle(): Promise<unknown> };
  /** Longest pause between the end of one cycle and the start of the next. */
  readonly cadenceMs: number;
  /** Delay before the first cycle after start() (default 0: recover at once after a restart). */
  readonly initialDelayMs?: number;
  readonly stopTimeoutMs?: number;
  readonly diagnostics?: DiagnosticsCallback;
  readonly diagnosticsPerMinute?: number;
  /** Keep the process alive on the timer (a long-lived runner); default false (unref'd). */
  readonly keepAlive?: boolean;
  /**
   * Read after every cycle: milliseconds until the next item a cycle must act on falls due (a
   * deadline, a retry), or null when none is known. The timer is armed for the earlier of it and
   * the cadence (docs/decisions/0176), so a due item is not left waiting for the cadence.
   */
  readonly nextDueInMs?: () => number | null;
  /** Read after every cycle: the cadence to use now when it backs off (e.g. a full disk), never below cadenceMs. */
  readonly cadenceNowMs?: () => number;
}

export type RunnerState = 'stopped' | 'running' | 'stopping';

export interface StopResult {
  /** false: the running cycle outlived the stop timeout; it will not schedule again, and start() is refused until it ends. */
  readonly drained: boolean;
}

const ignore = (): void => undefined;

function validatedOptions(options: LifecycleRunnerOptions): {
  cadenceMs: number;
  initialDelayMs: number;
  stopTimeoutMs: number;
  perMinute: number;
} {
  const bounded = (
    value: number | undefined,
    name: string,
    min: number,
    max: number,
    fallback: number,
    code: string,
  ): number => (value === undefined ? fallback : validateBoundedInteger(value, name, min, max, code));
  const result = {
    cadenceMs: validateBoundedInteger(
      options.cadenceMs,
      'cadenceMs',
      CADENCE_MIN_MS,
      CADENCE_MAX_MS,
      'ERR_PIDFENCE_INVALID_CADENCE',
    ),
    initialDelayMs: bounded(
      options.initialDelayMs,
      'initialDelayMs',
      0,
      CADENCE_MAX_MS,
      0,
      'ERR_PIDFENCE_INVALID_CADENCE',
    ),
    stopTimeoutMs: bounded(
      options.stopTimeoutMs,
      'stopTimeoutMs',
      0,
      STOP_TIMEOUT_MAX_MS,
      STOP_TIMEOUT_DEFAULT_MS,
      'ERR_PIDFENCE_INVALID_STOP_TIMEOUT',
    ),
    perMinute: bounded(
      options.diagnosticsPerMinute,
      'diagnosticsPerMinute',
      1,
      DIAGNOSTICS_PER_MINUTE_MAX,
      DIAGNOSTICS_PER_MINUTE_DEFAULT,
      'ERR_PIDFENCE_INVALID_DIAGNOSTICS_LIMIT',
    ),
  };
  if (typeof options.supervisor?.runCycle !== 'function') {
    throw new PidfenceRangeError(
      'supervisor must have runCycle(); pass a Supervisor.',
      'ERR_PIDFENCE_INVALID_SUPERVISOR',
    );
  }
  return result;
}

export class LifecycleRunner {
  readonly cadenceMs: number;
  readonly initialDelayMs: number;
  readonly stopTimeoutMs: number;
  readonly #supervisor: { runCycle(): Promise<unknown> };
  readonly #diagnostics: RateLimitedDiagnostics;
  readonly #keepAlive: boolean;
  readonly #nextDueInMs: (() => number | null) | undefined;
  readonly #cadenceNowMs: (() => number) | undefined;
  #state: RunnerState = 'stopped';
  /** Bumped by start() and stop(): a cycle of an older generation never schedules a timer. */
  #generation = 0;
  #timer: NodeJS.Timeout | null = null;
  /** The cycle running now (timed or runNow), settled; null when none runs. */
  #inFlight: Promise<void> | null = null;
  #stopping: Promise<StopResult> | null = null;
  /** A wake-up arrived since the last cycle began: one more cycle runs at once (coalesced). */
  #wakePending = false;
  #wakeUps = 0;

  constructor(options: LifecycleRunnerOptions) {
    const valid = validatedOptions(options);
    this.cadenceMs = valid.cadenceMs;
    this.initialDelayMs = valid.initialDelayMs;
    this.stopTimeoutMs = valid.stopTimeoutMs;
    this.#supervisor = options.supervisor;
    this.#diagnostics = new RateLimitedDiagnostics(options.diagnostics, valid.perMinute);
    this.#keepAlive = options.keepAlive === true;
    this.#nextDueInMs = options.nextDueInMs;
    this.#cadenceNowMs = options.cadenceNowMs;
  }

  get state(): RunnerState {
    return this.#state;
  }

  /** True while a cycle (possibly one left over from before stop()) is running. */
  get cycleRunning(): boolean {
    return this.#inFlight !== null;
  }

  /** Wake-ups received since construction (coalesced ones included); a count only. */
  get wakeUps(): number {
    return this.#wakeUps;
  }

  /** Creates the one timer. Refused while running, or while a timed-out cycle has not ended. */
  start(): void {
    if (this.#state !== 'stopped') {
      throw new PidfenceError(
        'the lifecycle runner is already started; call stop() first.',
        'ERR_PIDFENCE_RUNNER_STARTED',
      );
    }
    if (this.#inFlight !== null) throw new RunnerDrainingError();
    this.#state = 'running';
    this.#stopping = null;
    this.#generation += 1;
    this.#schedule(this.#generation, this.initialDelayMs);
  }

  /** Idempotent: cancels the pending timer at once, then waits at most `timeoutMs` for a running cycle. */
  stop(timeoutMs: number = this.stopTimeoutMs): Promise<StopResult> {
    if (this.#stopping !== null) return this.#stopping;
    if (this.#state !== 'running') return Promise.resolve({ drained: this.#inFlight === null });
    this.#state = 'stopping';
    this.#generation += 1;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#stopping = this.#waitForCycle(Math.min(Math.max(0, timeoutMs), STOP_TIMEOUT_MAX_MS)).then((drained) => {
      this.#state = 'stopped';
      return { drained };
    });
    return this.#stopping;
  }

  /**
   * "Look now" (a committed cancel elsewhere, a completion notice, a new admission): the next cycle
   * runs at once, or right after the running one. Any number of wake-ups before a cycle starts make
   * one cycle, so a flood costs at most one extra cycle (docs/decisions/0175).
   */
  wake(): void {
    this.#wakeUps += 1;
    if (this.#state !== 'running') return;
    this.#wakePending = true;
    this.#pullForward();
  }

  /** One cycle now (drain, tests, a first pass), after any running cycle and before the next; its result and errors are the caller's. */
  async runNow<T>(work: () => Promise<T>): Promise<T> {
    try {
      return (await this.#serially(work, () => true)) as T;
    } finally {
      // A wake-up that came while this cycle ran is taken by the next one at once.
      if (this.#wakePending) this.#pullForward();
    }
  }

  /** Resolves once no cycle is running (for a caller that got drained: false). */
  async drained(): Promise<void> {
    while (this.#inFlight !== null) await this.#inFlight;
  }

  /** Runs `work` once no other cycle runs, unless `wanted()` turned false meanwhile; never two cycles at once. */
  async #serially<T>(work: () => Promise<T>, wanted: () => boolean): Promise<T | undefined> {
    while (this.#inFlight !== null) await this.#inFlight;
    if (!wanted()) return undefined;
    this.#wakePending = false;
    const running = work();
    const settled = running.then(ignore, ignore);
    this.#inFlight = settled;
    try {
      return await running;
    } finally {
      if (this.#inFlight === settled) this.#inFlight = null;
    }
  }

  /** A timed cycle: a rejection or a controller failure goes to the diagnostics, never further. */
  async #timedCycle(): Promise<void> {
    try {
      reportControllerFailures(this.#diagnostics, await this.#supervisor.runCycle());
    } catch (error) {
      this.#diagnostics.report(diagnosticCode(error));
    }
  }

  #current(generation: number): boolean {
    return generation === this.#generation && this.#state === 'running';
  }

  /** Moves the pending timer to now instead of adding one; a running cycle is followed at once instead. */
  #pullForward(): void {
    if (this.#state !== 'running' || this.#inFlight !== null || this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#schedule(this.#generation, 0);
  }

  /** After a cycle: at once when woken meanwhile, else the earlier of the cadence and the next due item. */
  #nextDelayMs(): number {
    if (this.#wakePending) return 0;
    let due: number | null;
    try {
      due = this.#nextDueInMs?.() ?? null;
    } catch {
      due = null; // a due hint that fails leaves the cadence
    }
    const cadence = this.#cadenceNow();
    return due === null || !Number.isFinite(due) ? cadence : Math.min(cadence, Math.max(0, Math.ceil(due)));
  }

  /** The cadence for the next pause: cadenceMs, or longer while the caller backs off. */
  #cadenceNow(): number {
    try {
      const backedOff = this.#cadenceNowMs?.();
      return backedOff === undefined || !Number.isFinite(backedOff)
        ? this.cadenceMs
        : Math.max(this.cadenceMs, Math.ceil(backedOff));
    } catch {
      return this.cadenceMs; // a failing hint leaves the cadence
    }
  }

  async #waitForCycle(timeoutMs: number): Promise<boolean> {
    const running = this.#inFlight;
    if (running === null) return true;
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timeout = setTimeout(() => resolve(false), timeoutMs);
    });
    const drained = await Promise.race([running.then(() => true as const), timedOut]);
    clearTimeout(timeout);
    return drained;
  }

  #schedule(generation: number, delayMs: number): void {
    const timer = setTimeout(() => this.#tick(generation), delayMs);
    if (!this.#keepAlive) timer.unref();
    this.#timer = timer;
  }

  #tick(generation: number): void {
    this.#timer = null;
    if (!this.#current(generation)) return;
    void this.#serially(
      () => this.#timedCycle(),
      () => this.#current(generation),
    ).finally(() => {
      // Only the current generation, still running, arms the next cycle: no overlap, and a cycle
      // that outlived stop() never revives the loop.
      if (this.#current(generation) && this.#timer === null) this.#schedule(generation, this.#nextDelayMs());
    });
  }
}
