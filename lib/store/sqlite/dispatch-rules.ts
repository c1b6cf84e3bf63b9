// The claim and settle rules of the SQLite store (design/dispatch §2.2, §2.4, §2.6), its one TypeScript
// home (docs/decisions/0231): what to do with the rows read under BEGIN IMMEDIATE, and how a result
// settles. The fences stay in the statements' WHERE clauses too, so a stale read can never write.
// PostgreSQL's home of the same rules is plpgsql: pidfence_claim_page and pidfence_record_results.
import {
  ATTEMPT_ACTIVE_STATUSES,
  classifyResult,
  leaseTokenDigest,
  runIsActive,
  type AttemptStatus,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type ClaimOutcome,
  type DispatchEventType,
  type DispatchResult,
  type NotEligibleReason,
  type RecordResultCommand,
  type RunRecord,
  type SettledStatus,
} from '../../contract/index';

/** What a claim writes: the digest (never the token) and the expiry from the store's own clock. */
export interface LeaseWrite {
  readonly owner: string;
  readonly digest: string;
  readonly expiresAtMs: number;
  readonly nowMs: number;
}

/**
 * The claim decision for the rows read under the write lock (steps 1-2, 4-6): refuse with an
 * outcome, insert the first (leased) record, or lease the existing record at `version` by CAS.
 */
export type ClaimPlan =
  | { readonly kind: 'refuse'; readonly outcome: ClaimOutcome }
  | { readonly kind: 'insert'; readonly lease: LeaseWrite }
  | { readonly kind: 'lease'; readonly lease: LeaseWrite; readonly version: number };

type ClaimRunFacts = Pick<RunRecord, 'owner' | 'status' | 'cancelRequestedAtMs'>;

/** Steps 1-2: the run is runtime-owned, active, cancelled at exactly that time; the attempt is active. */
function claimIneligibility(
  run: ClaimRunFacts | undefined,
  attemptStatus: AttemptStatus | undefined,
  cancelRequestedAtMs: number,
): NotEligibleReason | null {
  if (run === undefined) return 'run_missing';
  if (run.owner !== 'runtime') return 'run_not_runtime';
  if (!runIsActive(run.status)) return 'run_terminal';
  if (run.cancelRequestedAtMs === null) return 'cancel_not_requested';
  if (run.cancelRequestedAtMs !== cancelRequestedAtMs) return 'cancel_mismatch';
  if (attemptStatus === undefined) return 'attempt_missing';
  if (!(ATTEMPT_ACTIVE_STATUSES as readonly string[]).includes(attemptStatus)) return 'attempt_inactive';
  return null;
}

type ClaimBlocker = 'attempt_conflict' | 'dispatched' | 'blocked' | 'not_due' | 'leased';

/**
 * Steps 4-5 for an existing record: fail closed on another attempt, never claim dispatched or
 * blocked, respect the due time and an unexpired lease. `null` means: lease it now (step 6).
 */
function existingRecordBlocker(
  record: CancellationDispatchRecord,
  attemptId: string,
  nowMs: number,
): ClaimBlocker | null {
  if (record.attemptId !== attemptId) return 'attempt_conflict';
  switch (record.status) {
    case 'dispatched':
    case 'blocked':
      return record.status;
    case 'leased':
      return (record.leaseExpiresAtMs ?? 0) > nowMs ? 'leased' : null;
    case 'pending':
    case 'retry_wait':
      return (record.nextAttemptAtMs ?? 0) > nowMs ? 'not_due' : null;
  }
}

export function planClaim(
  command: ClaimCommand,
  run: ClaimRunFacts | undefined,
  attemptStatus: AttemptStatus | undefined,
  existing: CancellationDispatchRecord | undefined,
  nowMs: number,
): ClaimPlan {
  const reason = claimIneligibility(run, attemptStatus, command.cancelRequestedAtMs);
  if (reason !== null) return { kind: 'refuse', outcome: { kind: 'not_eligible', reason } };
  const lease = {
    owner: command.owner,
    digest: leaseTokenDigest(command.token),
    expiresAtMs: nowMs + command.leaseDurationMs,
    nowMs,
  };
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
