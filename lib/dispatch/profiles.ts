// Deployment profiles (design/dispatch §2.6, design/execution §4): one table of named presets for every
// periodic loop of the package: how often the one timer fires and how much each wake may look at.
// Profiles change how often and how much is looked at, never the lease/fencing rules.
import { PidfenceRangeError } from '../base/errors';

export type ProfileName = 'edge' | 'standalone' | 'cluster';

export interface Profile {
  readonly name: ProfileName;
  /** Pause between the end of one cycle and the start of the next. */
  readonly periodMs: number;
  /** Items per page of every source (due dispatches, deadlines, active attempts), ≤ 64. */
  readonly pageSize: number;
  /** Due-dispatch pages per cycle of a dispatch-only LifecycleRunner (≤ 64). */
  readonly pagesPerCycle: number;
  /** The bounded wait for a running cycle on stop(). */
  readonly stopTimeoutMs: number;
  readonly diagnosticsPerMinute: number;
  /** How often the receipt journal is cleaned and gone runners' attempts are adopted. */
  readonly cleanupPeriodMs: number;
  readonly cleanupPage: number;
  /** Pages of active attempts one drain may read. */
  readonly drainPages: number;
}

/** @deprecated the one table's entry type; use Profile. */
export type DispatchProfile = Profile;

export const PROFILES: Readonly<Record<ProfileName, Profile>> = Object.freeze({
  // A router: one process, SQLite on flash; wake rarely, look at little, one page per wake.
  edge: Object.freeze({
    name: 'edge',
    periodMs: 5_000,
    pageSize: 4,
    pagesPerCycle: 1,
    stopTimeoutMs: 2_000,
    diagnosticsPerMinute: 2,
    cleanupPeriodMs: 5 * 60_000,
    cleanupPage: 8,
    drainPages: 2,
  }),
  // One server: the defaults of design/dispatch §2.6 (32 × 4 per cycle), once a second.
  standalone: Object.freeze({
    name: 'standalone',
    periodMs: 1_000,
    pageSize: 32,
    pagesPerCycle: 4,
    stopTimeoutMs: 5_000,
    diagnosticsPerMinute: 6,
    cleanupPeriodMs: 60_000,
    cleanupPage: 32,
    drainPages: 8,
  }),
  // Many replicas on PostgreSQL: same cadence, full pages; leases keep the replicas apart.
  cluster: Object.freeze({
    name: 'cluster',
    periodMs: 1_000,
    pageSize: 64,
    pagesPerCycle: 4,
    stopTimeoutMs: 10_000,
    diagnosticsPerMinute: 6,
    cleanupPeriodMs: 60_000,
    cleanupPage: 64,
    drainPages: 8,
  }),
});

/** The local execution lifecycle runs only on one host's store: edge or standalone. */
export const LOCAL_PROFILES: readonly ProfileName[] = ['edge', 'standalone'];

export function profile(name: string, allowed: readonly ProfileName[] = ['edge', 'standalone', 'cluster']): Profile {
  const found = (PROFILES as Record<string, Profile | undefined>)[name];
  if (found === undefined || !allowed.includes(found.name)) {
    throw new PidfenceRangeError(
      `unknown profile; use ${allowed.map((entry) => `"${entry}"`).join(', ')}.`,
      'ERR_PIDFENCE_INVALID_PROFILE',
    );
  }
  return found;
}
