// The bounded diagnostics channel of the lifecycle runner (design/dispatch §2.6): low-sensitivity
// records `{ code, count }` only, at most N per minute, the rest folded into one suppressed count.

/** A stable error code and how many times it happened; never a message, path, PID or SQL. */
export interface DiagnosticRecord {
  readonly code: string;
  readonly count: number;
}

export type DiagnosticsCallback = (record: DiagnosticRecord) => void;

export const DIAGNOSTICS_WINDOW_MS = 60_000;
export const DIAGNOSTICS_PER_MINUTE_DEFAULT = 6;
export const DIAGNOSTICS_PER_MINUTE_MAX = 60;
/** Emitted once a window rolls over, with how many records were dropped in the last one. */
export const DIAGNOSTICS_SUPPRESSED_CODE = 'ERR_PIDFENCE_DIAGNOSTICS_SUPPRESSED';
/** Used for anything thrown without a project error code. */
export const DIAGNOSTICS_UNKNOWN_CODE = 'ERR_PIDFENCE_CYCLE_FAILED';

const CODE_PATTERN = /^ERR_[A-Z0-9_]{1,60}$/;

/** A thrown value reduced to its stable code: the message is never looked at. */
export function diagnosticCode(error: unknown): string {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && CODE_PATTERN.test(code) ? code : DIAGNOSTICS_UNKNOWN_CODE;
}

export class RateLimitedDiagnostics {
  readonly #sink: DiagnosticsCallback | undefined;
  readonly #perWindow: number;
  readonly #now: () => number;
  #windowStart = -Infinity;
  #emitted = 0;
  #suppressed = 0;

  constructor(sink: DiagnosticsCallback | undefined, perWindow: number, now: () => number = Date.now) {
    this.#sink = sink;
    this.#perWindow = perWindow;
    this.#now = now;
  }

  report(code: string): void {
    const now = this.#now();
    if (now - this.#windowStart >= DIAGNOSTICS_WINDOW_MS) {
      const suppressed = this.#suppressed;
      this.#windowStart = now;
      this.#emitted = 0;
      this.#suppressed = 0;
      if (suppressed > 0) this.#deliver({ code: DIAGNOSTICS_SUPPRESSED_CODE, count: suppressed });
    }
    if (this.#emitted >= this.#perWindow) {
      this.#suppressed += 1;
      return;
    }
    this.#emitted += 1;
    this.#deliver({ code, count: 1 });
  }

  /** A throwing callback must not end the loop that reports to it. */
  #deliver(record: DiagnosticRecord): void {
    try {
      this.#sink?.(Object.freeze({ ...record }));
    } catch {
      // Nothing to do: the diagnostics channel is best-effort by design.
    }
  }
}
