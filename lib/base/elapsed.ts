// Monotonic durations for metrics (docs/decisions/0110): a start reading and the seconds since it.

/** A monotonic start reading. */
export function monotonicNow(): bigint {
  return process.hrtime.bigint();
}

/** Seconds since a monotonicNow() reading. */
export function secondsSince(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e9;
}
