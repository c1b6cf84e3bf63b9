// The control profiles of ADR-0072 §4: how often the one timer fires and how much each wake may
// look at. cluster-control/worker do not assemble this local lifecycle.
import { PidfenceRangeError } from '../base/errors';

export type ExecutionProfileName = 'edge' | 'standalone';

export interface ExecutionProfile {
  readonly name: ExecutionProfileName;
  /** Pause between the end of one control cycle and the start of the next. */
  readonly controlPeriodMs: number;
  /** Items per control page (deadlines, cancellations, active attempts). */
  readonly controlPage: number;
  readonly cleanupPeriodMs: number;
  readonly cleanupPage: number;
  /** Pages of active attempts one drain may read. */
  readonly drainPages: number;
}

export const EXECUTION_PROFILES: Readonly<Record<ExecutionProfileName, ExecutionProfile>> = Object.freeze({
  edge: Object.freeze({ name: 'edge', controlPeriodMs: 5_000, controlPage: 4, cleanupPeriodMs: 5 * 60_000, cleanupPage: 8, drainPages: 2 }),
  standalone: Object.freeze({ name: 'standalone', controlPeriodMs: 1_000, controlPage: 32, cleanupPeriodMs: 60_000, cleanupPage: 32, drainPages: 8 }),
});

export function executionProfile(name: string): ExecutionProfile {
  const found = (EXECUTION_PROFILES as Record<string, ExecutionProfile | undefined>)[name];
  if (found === undefined) throw new PidfenceRangeError('unknown execution profile; use "edge" or "standalone".', 'ERR_PIDFENCE_INVALID_PROFILE');
  return found;
}
