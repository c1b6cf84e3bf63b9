// The claim decision of design/dispatch §2.2 as pure functions, so both stores apply the same rules to
// the rows they read under their own locks: steps 1-2 (eligibility) and 4-5 (existing record).
import type { CancellationDispatchRecord, ClaimCommand, NotEligibleReason } from './cancellation-dispatch';
import { ATTEMPT_ACTIVE_STATUSES, runIsActive, type AttemptStatus, type RunOwner, type RunStatus } from './run';

/** The run fields a claim checks (step 1). */
export interface ClaimRunFacts {
  readonly owner: RunOwner;
  readonly status: RunStatus;
  readonly cancelRequestedAtMs: number | null;
}

/** Steps 1-2: the run is runtime-owned, active, cancelled at exactly that time; the attempt is active. */
export function claimIneligibility(
  run: ClaimRunFacts | undefined,
  attemptStatus: AttemptStatus | undefined,
  command: Pick<ClaimCommand, 'cancelRequestedAtMs'>,
): NotEligibleReason | null {
  if (run === undefined) return 'run_missing';
  if (run.owner !== 'runtime') return 'run_not_runtime';
  if (!runIsActive(run.status)) return 'run_terminal';
  if (run.cancelRequestedAtMs === null) return 'cancel_not_requested';
  if (run.cancelRequestedAtMs !== command.cancelRequestedAtMs) return 'cancel_mismatch';
  if (attemptStatus === undefined) return 'attempt_missing';
  if (!(ATTEMPT_ACTIVE_STATUSES as readonly string[]).includes(attemptStatus)) return 'attempt_inactive';
  return null;
}

export type ClaimBlocker = 'attempt_conflict' | 'dispatched' | 'blocked' | 'not_due' | 'leased';

/**
 * Steps 4-5 for an existing record: fail closed on another attempt, never claim dispatched or
 * blocked, respect the due time and an unexpired lease. `null` means: lease it now (step 6).
 */
export function existingRecordBlocker(record: CancellationDispatchRecord, attemptId: string, nowMs: number): ClaimBlocker | null {
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
