// The bounded diagnostics channel of the lifecycle runner (design/dispatch §2.6): low-sensitivity
// records `{ code, count }` (and a syscall's errno name) only, at most N per minute, the rest folded
// into one suppressed count. Controller failures inside a cycle come here too (docs/decisions/0142).

/** A stable error code and how many times it happened; never a message, path, PID or SQL. */
export interface DiagnosticRecord {
  readonly code: string;
  readonly count: number;
  /** The errno name of a failed syscall (`EPERM`), when the error carried one. */
  readonly errno?: string;
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

const ERRNO_PATTERN = /^E[A-Z0-9]{1,15}$/;

/** A thrown value reduced to its stable code: the message is never looked at. */
export function diagnosticCode(error: unknown): string {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && CODE_PATTERN.test(code) ? code : DIAGNOSTICS_UNKNOWN_CODE;
}

/** A failure as low-sensitivity facts: its code and, for a failed syscall, its errno name. */
export interface FailureFacts {
  readonly code: string;
  readonly errno: string | null;
}

export function failureFactsOf(error: unknown): FailureFacts {
  const errno = typeof error === 'object' && error !== null ? (error as { errno?: unknown }).errno : undefined;
  return { code: diagnosticCode(error), errno: typeof errno === 'string' && ERRNO_PATTERN.test(errno) ? errno : null };
}

export class RateLimitedDiagnostics {
  readonly #sink: DiagnosticsCallback | undefined;
  readonly #perWindow: number;
  readonly #now: () => number;
  #windowStart = -Infinity;
  #emitted = 0;
  #suppressed = 0;

  /** `now` is monotonic by default: a wall-clock step must not mute or flood the diagnostics. */
  constructor(sink: DiagnosticsCallback | undefined, perWindow: number, now: () => number = () => performance.now()) {
    this.#sink = sink;
    this.#perWindow = perWindow;
    this.#now = now;
  }

  report(code: string, errno: string | null = null): void {
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
    this.#deliver(errno === null ? { code, count: 1 } : { code, count: 1, errno });
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

/**
 * A controller failure inside a cycle is not a failed cycle (the dispatch settled dispatch_error and
 * backs off), but an operator must hear of it: each one goes to the diagnostics with its code and errno.
 */
export function reportControllerFailures(diagnostics: RateLimitedDiagnostics, report: unknown): void {
  const failures = (report as { controllerFailures?: unknown } | null)?.controllerFailures;
  if (!Array.isArray(failures)) return;
  for (const failure of failures as FailureFacts[]) diagnostics.report(failure.code, failure.errno);
}
