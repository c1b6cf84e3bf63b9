// The steps of claim and recordResult that are the same in every store (design/dispatch §2.2, §2.4, §2.6):
// what to do with the rows read under the store's locks, and how a result settles. Stores add SQL only.
import {
  claimIneligibility,
  classifyResult,
  existingRecordBlocker,
  leaseTokenDigest,
  type AttemptStatus,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type ClaimOutcome,
  type ClaimRunFacts,
  type DispatchEventType,
  type DispatchResult,
  type DueCursor,
  type DueItem,
  type DuePage,
  type RecordResultCommand,
  type SettledStatus,
} from '../contract/index';

/** Cursor position before every real key (times are >= 0, ids are non-empty). */
export const FIRST_DUE_CURSOR: DueCursor = { atMs: -1, runId: '' };

/** What a claim writes: the digest (never the token) and the expiry from the store's own clock. */
export interface LeaseWrite {
  readonly owner: string;
  readonly digest: string;
  readonly expiresAtMs: number;
  readonly nowMs: number;
}

/**
 * The claim decision for the rows a store read under its locks (steps 1-2, 4-6): refuse with an
 * outcome, insert the first (leased) record, or lease the existing record at `version` by CAS.
 */
export type ClaimPlan =
  | { readonly kind: 'refuse'; readonly outcome: ClaimOutcome }
  | { readonly kind: 'insert'; readonly lease: LeaseWrite }
  | { readonly kind: 'lease'; readonly lease: LeaseWrite; readonly version: number };

export function planClaim(
  command: ClaimCommand,
  run: ClaimRunFacts | undefined,
  attemptStatus: AttemptStatus | undefined,
  existing: CancellationDispatchRecord | undefined,
  nowMs: number,
): ClaimPlan {
  const reason = claimIneligibility(run, attemptStatus, command);
  if (reason !== null) return { kind: 'refuse', outcome: { kind: 'not_eligible', reason } };
  const lease = { owner: command.owner, digest: leaseTokenDigest(command.token), expiresAtMs: nowMs + command.leaseDurationMs, nowMs };
  if (existing === undefined) return { kind: 'insert', lease };
  const blocker = existingRecordBlocker(existing, command.attemptId, nowMs);
  if (blocker !== null) return { kind: 'refuse', outcome: { kind: blocker } };
  return { kind: 'lease', lease, version: existing.version };
}

/** How a result settles the record (design/dispatch §2.4 table), with every time made absolute from `nowMs`. */
export interface Settlement {
  readonly status: SettledStatus;
  readonly result: DispatchResult;
  readonly eventType: DispatchEventType;
  readonly digest: string;
  readonly nextAttemptAtMs: number | null;
  readonly blockedAtMs: number | null;
  readonly nowMs: number;
}

export function settlementOf(command: RecordResultCommand, nowMs: number): Settlement {
  const settled = classifyResult(command.result);
  return {
    status: settled.status,
    result: command.result,
    eventType: settled.eventType,
    digest: leaseTokenDigest(command.token),
    // The validator guarantees retryDelayMs for exactly the retryable results.
    nextAttemptAtMs: settled.retryable ? nowMs + (command.retryDelayMs ?? 0) : null,
    blockedAtMs: settled.status === 'blocked' ? nowMs : null,
    nowMs,
  };
}

/** A due page from at most `limit` rows in keyset order: `next` only when the page is full. */
export function duePageOf(rows: readonly DueItem[], limit: number): DuePage {
  const last = rows[rows.length - 1];
  return {
    items: rows.map((row) => ({ runId: row.runId, attemptId: row.attemptId, cancelRequestedAtMs: row.cancelRequestedAtMs, source: row.source, atMs: row.atMs })),
    next: rows.length === limit && last !== undefined ? { atMs: last.atMs, runId: last.runId } : null,
  };
}
