// LifecycleRunner (design/dispatch §2.6): a Supervisor on the one CycleTimer, for embedders that use the
// dispatch layer alone: explicit start()/stop(); only start() creates a timer (unref'd); the next
// cycle is scheduled only after the previous one ended; errors, and controller failures inside a
// cycle, go to bounded diagnostics.
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
import { CycleTimer, type CycleTimerState } from './cycle-timer';
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
  /** Pause between the end of one cycle and the start of the next. */
  readonly cadenceMs: number;
  /** Delay before the first cycle after start() (default 0: recover at once after a restart). */
  readonly initialDelayMs?: number;
  readonly stopTimeoutMs?: number;
  readonly diagnostics?: DiagnosticsCallback;
  readonly diagnosticsPerMinute?: number;
}

export type RunnerState = CycleTimerState;

export interface StopResult {
  /** false: the running cycle outlived stopTimeoutMs; it will not schedule again, and start() is refused until it ends. */
  readonly drained: boolean;
}

export class LifecycleRunner {
  readonly cadenceMs: number;
  readonly initialDelayMs: number;
  readonly stopTimeoutMs: number;
  readonly #timer: CycleTimer;

  constructor(options: LifecycleRunnerOptions) {
    this.cadenceMs = validateBoundedInteger(options.cadenceMs, 'cadenceMs', CADENCE_MIN_MS, CADENCE_MAX_MS, 'ERR_PIDFENCE_INVALID_CADENCE');
    this.initialDelayMs = options.initialDelayMs === undefined
      ? 0
      : validateBoundedInteger(options.initialDelayMs, 'initialDelayMs', 0, CADENCE_MAX_MS, 'ERR_PIDFENCE_INVALID_CADENCE');
    this.stopTimeoutMs = options.stopTimeoutMs === undefined
      ? STOP_TIMEOUT_DEFAULT_MS
      : validateBoundedInteger(options.stopTimeoutMs, 'stopTimeoutMs', 0, STOP_TIMEOUT_MAX_MS, 'ERR_PIDFENCE_INVALID_STOP_TIMEOUT');
    const perMinute = options.diagnosticsPerMinute === undefined
      ? DIAGNOSTICS_PER_MINUTE_DEFAULT
      : validateBoundedInteger(options.diagnosticsPerMinute, 'diagnosticsPerMinute', 1, DIAGNOSTICS_PER_MINUTE_MAX, 'ERR_PIDFENCE_INVALID_DIAGNOSTICS_LIMIT');
    if (typeof options.supervisor?.runCycle !== 'function') {
      throw new PidfenceRangeError('supervisor must have runCycle(); pass a Supervisor.', 'ERR_PIDFENCE_INVALID_SUPERVISOR');
    }
    const supervisor = options.supervisor;
    const diagnostics = new RateLimitedDiagnostics(options.diagnostics, perMinute);
    this.#timer = new CycleTimer({
      cycle: async () => {
        try {
          reportControllerFailures(diagnostics, await supervisor.runCycle());
        } catch (error) {
          diagnostics.report(diagnosticCode(error));
        }
      },
      nextDelayMs: () => this.cadenceMs,
    });
  }

  get state(): RunnerState {
    return this.#timer.state;
  }

  /** True while a cycle (possibly one left over from before stop()) is running. */
  get cycleRunning(): boolean {
    return this.#timer.cycleRunning;
  }

  /** Creates the first (unref'd) timer. Refused while running, or while a timed-out cycle has not ended. */
  start(): void {
    if (this.#timer.state !== 'stopped') {
      throw new PidfenceError('the lifecycle runner is already started; call stop() first.', 'ERR_PIDFENCE_RUNNER_STARTED');
    }
    if (this.#timer.cycleRunning) throw new RunnerDrainingError();
    this.#timer.start(this.initialDelayMs);
  }

  /** Cancels the pending timer at once, then waits up to stopTimeoutMs for a running cycle. */
  stop(): Promise<StopResult> {
    return this.#timer.stop(this.stopTimeoutMs);
  }

  /** Resolves once no cycle is running (for a caller that got drained: false). */
  drained(): Promise<void> {
    return this.#timer.idle();
  }
}
