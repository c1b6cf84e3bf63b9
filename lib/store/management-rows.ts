// What the SQLite and PostgreSQL management stores share besides SQL text (design/dispatch §5): the
// row mappers, the summary's column aliases and the rearm decision. The SQL text is in
// management-statements.ts (docs/decisions/0410).
import {
  BLOCKING_RESULTS,
  DISPATCH_STATUSES,
  INSPECTION_KEYS,
  type BlockingCounts,
  type CancellationDispatchRecord,
  type DispatchInspection,
  type RearmCommand,
  type RearmOutcome,
  type RunListPosition,
  type StateCounts,
  type SummaryCounts,
} from '../contract/index';
import { isPlainObject } from '../base/shape';
import { storeInvariant } from './store-errors';

/** The summary statement's column alias of each dispatch status and blocking result. */
export const STATE_ALIASES: Readonly<Record<string, string>> = {
  pending: 'pending',
  leased: 'leased',
  retry_wait: 'retryWait',
  dispatched: 'dispatched',
  blocked: 'blocked',
};

export const BLOCKING_ALIASES: Readonly<Record<string, string>> = {
  identity_mismatch: 'identityMismatch',
  pid_mismatch: 'pidMismatch',
  unsupported: 'unsupported',
  invalid: 'invalid',
};

/** The keyset parameters of a run page, named as both stores' statements name them. */
export function runRowsParams(query: {
  readonly projectId: string;
  readonly before: RunListPosition;
  readonly limit: number;
}): { projectId: string; beforeAtMs: number; beforeRunId: string; limit: number } {
  return {
    projectId: query.projectId,
    beforeAtMs: query.before.createdAtMs,
    beforeRunId: query.before.runId,
    limit: query.limit,
  };
}

/** Keeps exactly the inspection keys of a row (a driver may add nothing, but a mapper never leaks). */
export function inspectionOf(row: Readonly<Record<string, unknown>>): DispatchInspection {
  const picked: Record<string, unknown> = {};
  for (const key of INSPECTION_KEYS) picked[key] = row[key];
  return picked as unknown as DispatchInspection;
}

/** The one-statement summary's row (always exactly one: it aggregates); anything else breaks the store's rule. */
export function summaryCountsOf(store: 'sqlite' | 'postgres', answer: unknown): SummaryCounts {
  if (!isPlainObject(answer)) throw storeInvariant(store, 'summary', 'the summary statement returned no row');
  const row = answer;
  const count = (alias: string): number => {
    const value = Number(row[alias]);
    if (!Number.isSafeInteger(value) || value < 0)
      throw storeInvariant(store, 'summary', `summary column ${alias} is not a count`);
    return value;
  };
  const states = Object.fromEntries(
    DISPATCH_STATUSES.map((status) => [status, count(STATE_ALIASES[status] ?? status)]),
  ) as unknown as StateCounts;
  const blockingResults = Object.fromEntries(
    BLOCKING_RESULTS.map((result) => [result, count(BLOCKING_ALIASES[result] ?? result)]),
  ) as unknown as BlockingCounts;
  return {
    permitted: count('permitted') > 0,
    asOfMs: count('asOfMs'),
    total: count('total'),
    states,
    blockingResults,
    overdue: count('overdue'),
    runEnded: count('runEnded'),
    running: count('running'),
  };
}

/**
 * The rearm decision on the record read under the store's lock, with the grant re-read in the same
 * transaction: `null` means go ahead with the CAS, anything else is the outcome (nothing written).
 */
export function rearmRefusal(
  record: CancellationDispatchRecord | undefined,
  permitted: boolean,
  command: RearmCommand,
): RearmOutcome | null {
  if (record === undefined) return { kind: 'not_found' };
  if (!permitted) return { kind: 'not_permitted' };
  if (record.version !== command.expectedVersion) return { kind: 'stale_version', version: record.version };
  if (record.status !== 'blocked') return { kind: 'not_blocked', status: record.status };
  if (record.lastResult !== command.expectedResult) return { kind: 'result_mismatch', lastResult: record.lastResult };
  return null;
}
