// Bounded waiting for tests: one home for delay, until and untilValue. The timers are the test's own
// (not lib/base/time's), so a timer census tells them from the product's by file.

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

export interface WaitOptions {
  /** How long to wait before failing (default 10 s). */
  readonly timeoutMs?: number;
  /** Pause between checks (default 25 ms). */
  readonly intervalMs?: number;
  /** Names what was awaited in the failure. */
  readonly what?: string;
  /** A check that throws counts as "not yet" (a server still starting, a replica catching up). */
  readonly retryErrors?: boolean;
}

/** Waits until `probe` yields a value other than undefined, and returns it. */
export async function untilValue<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  options: WaitOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = options.retryErrors
      ? await Promise.resolve()
          .then(probe)
          .catch(() => undefined)
      : await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${options.what ?? 'condition'} did not hold within ${timeoutMs} ms`);
    await delay(options.intervalMs ?? 25);
  }
}

/** Waits until `predicate` holds; resolves with the milliseconds it took. */
export async function until(predicate: () => boolean | Promise<boolean>, options: WaitOptions = {}): Promise<number> {
  const startedAt = Date.now();
  await untilValue(async () => ((await predicate()) ? true : undefined), options);
  return Date.now() - startedAt;
}
