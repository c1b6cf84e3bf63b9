// The one periodic timer primitive (docs/decisions/0032, 0072): serial, non-overlapping cycles on a
// single setTimeout that is created only by start() and rescheduled only after a cycle ended; a
// pull-forward that moves the pending timer instead of adding one; run-now that never overlaps a
// timed cycle; and a bounded, idempotent stop. A cycle that outlived stop() never revives the loop
// (generations). Both the dispatch LifecycleRunner and the execution ControlLifecycle run on it.
export type CycleTimerState = 'stopped' | 'running' | 'stopping';

export interface CycleTimerOptions {
  /** One cycle; its rejection is the caller's to report (`onError`), never the timer's. */
  readonly cycle: () => Promise<void>;
  /** The pause after a cycle, read after every cycle (a caller may want 0 while work is pending). */
  readonly nextDelayMs: () => number;
  /** Keep the process alive on the timer (a long-lived runner); default false (unref'd). */
  readonly keepAlive?: boolean;
}

export class CycleTimer {
  readonly #options: CycleTimerOptions;
  #state: CycleTimerState = 'stopped';
  /** Bumped by start() and stop(): a cycle of an older generation never schedules a timer. */
  #generation = 0;
  #timer: NodeJS.Timeout | null = null;
  #inFlight: Promise<void> | null = null;
  #stopping: Promise<{ drained: boolean }> | null = null;

  constructor(options: CycleTimerOptions) {
    this.#options = options;
  }

  get state(): CycleTimerState {
    return this.#state;
  }

  /** True while a cycle (possibly one left over from before stop()) is running. */
  get cycleRunning(): boolean {
    return this.#inFlight !== null;
  }

  /** Creates the one timer. The caller refuses a start while running or while a cycle is in flight. */
  start(initialDelayMs = 0): void {
    this.#state = 'running';
    this.#stopping = null;
    this.#generation += 1;
    this.#schedule(this.#generation, initialDelayMs);
  }

  /** Idempotent: cancels the timer at once and waits at most `timeoutMs` for a running cycle. */
  stop(timeoutMs: number): Promise<{ drained: boolean }> {
    if (this.#stopping !== null) return this.#stopping;
    if (this.#state !== 'running') return Promise.resolve({ drained: this.#inFlight === null });
    this.#state = 'stopping';
    this.#generation += 1;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#stopping = this.#waitForCycle(timeoutMs).then((drained) => {
      this.#state = 'stopped';
      return { drained };
    });
    return this.#stopping;
  }

  /** Moves the pending timer to now (a notice arrived) instead of adding one. */
  pullForward(): void {
    if (this.#state !== 'running' || this.#inFlight !== null || this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#schedule(this.#generation, 0);
  }

  /** Runs `work` now, after any running cycle and before the next one starts. */
  async runExclusive<T>(work: () => Promise<T>): Promise<T> {
    while (this.#inFlight !== null) await this.#inFlight;
    const running = work();
    this.#inFlight = running.then(() => undefined, () => undefined);
    try {
      return await running;
    } finally {
      this.#inFlight = null;
    }
  }

  /** Resolves once no cycle is running. */
  async idle(): Promise<void> {
    while (this.#inFlight !== null) await this.#inFlight;
  }

  async #waitForCycle(timeoutMs: number): Promise<boolean> {
    const running = this.#inFlight;
    if (running === null) return true;
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => { timeout = setTimeout(() => resolve(false), timeoutMs); });
    const drained = await Promise.race([running.then(() => true as const), timedOut]);
    clearTimeout(timeout);
    return drained;
  }

  #schedule(generation: number, delayMs: number): void {
    const timer = setTimeout(() => this.#tick(generation), delayMs);
    if (this.#options.keepAlive !== true) timer.unref();
    this.#timer = timer;
  }

  #tick(generation: number): void {
    this.#timer = null;
    if (generation !== this.#generation || this.#state !== 'running') return;
    const cycle = this.#options.cycle().then(() => undefined, () => undefined).finally(() => {
      this.#inFlight = null;
      // Only the current generation, still running, schedules the next cycle: no overlap, and a
      // cycle that outlived stop() never revives the loop.
      if (generation === this.#generation && this.#state === 'running' && this.#timer === null) this.#schedule(generation, this.#options.nextDelayMs());
    });
    this.#inFlight = cycle;
  }
}
