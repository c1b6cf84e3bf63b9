// Waiting and timing helpers shared by the layers that bound how long they wait or measure it.

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** Resolves with true when `work` settled (either way), false when `ms` passed first; never rejects. */
export function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, ms));
    void work
      .then(
        () => true,
        () => true,
      )
      .then(() => {
        clearTimeout(timer);
        resolve(true);
      });
  });
}

/** A monotonic start reading, for durations (docs/decisions/0110). */
export function monotonicNow(): bigint {
  return process.hrtime.bigint();
}

/** Seconds since a monotonicNow() reading. */
export function secondsSince(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** Seconds as a person reads them: `30s`, `0.5s`. */
export function secondsText(ms: number): string {
  return `${Number((ms / 1_000).toFixed(3))}s`;
}
