// The boot clock (docs/decisions/0160): CLOCK_BOOTTIME in whole milliseconds, paired with the boot id
// it belongs to. Durations, deadlines, leases and receipt times are measured on it within a boot; the
// wall clock (Date.now) may step by a day with an NTP sync and is kept for what people read.
import { PidfenceError } from '../base/errors';
import { getAddon } from './loader';

/** One reading: `bootMs` is only comparable with readings of the same `bootId`. */
export interface BootReading {
  readonly bootId: string;
  readonly bootMs: number;
}

let cachedBootId: string | undefined;

function bootIdOnce(): string | null {
  if (cachedBootId !== undefined) return cachedBootId;
  const result = getAddon()?.bootId();
  if (result === undefined || result.kind !== 'ok') return null;
  cachedBootId = result.bootId;
  return cachedBootId;
}

/** Milliseconds since boot (CLOCK_BOOTTIME, counts suspend); null without the addon. */
export function bootClockMs(): number | null {
  const result = getAddon()?.bootClockMs();
  if (result === undefined) return null;
  if (result.kind === 'error') {
    throw new PidfenceError(
      `reading CLOCK_BOOTTIME failed with ${result.errno}; this kernel lacks the boot clock.`,
      'ERR_PIDFENCE_SYSCALL',
      { errno: result.errno },
    );
  }
  return result.ms;
}

/** Now on the boot clock with its boot id; null without the addon (then only the wall clock exists). */
export function bootNow(): BootReading | null {
  const bootId = bootIdOnce();
  if (bootId === null) return null;
  const bootMs = bootClockMs();
  return bootMs === null ? null : { bootId, bootMs };
}

const processStart = performance.now();

/**
 * A monotonic millisecond reading for in-process durations (grace, bounds, periods): the boot clock
 * where the addon is loaded, else performance.now (monotonic too, but it stops while suspended).
 * Compare two readings of one process only.
 */
export function monotonicMs(): number {
  return bootClockMs() ?? performance.now() - processStart;
}
