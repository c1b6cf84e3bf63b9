// Deployment profiles (ADR-0005 §2.6, DESIGN §8): named presets of cadence, page sizes and stop
// bound. Profiles change how often and how much is looked at, never the lease/fencing rules.
import { PidfenceRangeError } from '../base/errors';

export type ProfileName = 'edge' | 'standalone' | 'cluster';

export interface DispatchProfile {
  readonly name: ProfileName;
  /** LifecycleRunner cadence between cycles. */
  readonly cadenceMs: number;
  /** Supervisor due page size (≤ 64). */
  readonly pageSize: number;
  /** Supervisor pages per cycle (≤ 64). */
  readonly pagesPerCycle: number;
  /** LifecycleRunner bounded drain on stop(). */
  readonly stopTimeoutMs: number;
  readonly diagnosticsPerMinute: number;
}

export const PROFILES: Readonly<Record<ProfileName, DispatchProfile>> = Object.freeze({
  // A router: one process, SQLite on flash; wake rarely, look at little, one page per wake.
  edge: Object.freeze({ name: 'edge', cadenceMs: 5_000, pageSize: 8, pagesPerCycle: 1, stopTimeoutMs: 2_000, diagnosticsPerMinute: 2 }),
  // One server: the ADR's defaults (32 × 4 per cycle), once a second.
  standalone: Object.freeze({ name: 'standalone', cadenceMs: 1_000, pageSize: 32, pagesPerCycle: 4, stopTimeoutMs: 5_000, diagnosticsPerMinute: 6 }),
  // Many replicas on PostgreSQL: same cadence, full pages; leases keep the replicas apart.
  cluster: Object.freeze({ name: 'cluster', cadenceMs: 1_000, pageSize: 64, pagesPerCycle: 4, stopTimeoutMs: 10_000, diagnosticsPerMinute: 6 }),
});

export function profile(name: ProfileName): DispatchProfile {
  const found = (PROFILES as Record<string, DispatchProfile | undefined>)[name];
  if (found === undefined) {
    throw new PidfenceRangeError('unknown dispatch profile; use "edge", "standalone" or "cluster".', 'ERR_PIDFENCE_INVALID_PROFILE');
  }
  return found;
}
