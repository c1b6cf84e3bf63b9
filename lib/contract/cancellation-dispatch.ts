// The canonical CancellationDispatch contract (design/dispatch §2.1-2.4, design/postgres §D1-D2): exact-shape
// commands, the record and its state invariants, claim/result outcomes, and the due-page query.
import { PidfenceRangeError } from '../base/errors';
import { classifyResult, DISPATCH_RESULTS, DISPATCH_STATUSES, type DispatchResult, type DispatchStatus } from './classification';
import type { DispatchEventPayload, RunEvent } from './events';
import { DUE_PAGE_DEFAULT, DUE_PAGE_MAX } from './limits';
import {
  enumField,
  nullableField,
  storedRecordValidator,
  validateBoundedInteger,
  validateCounter,
  validateDigest,
  validateDispatchResult,
  validateEnum,
  validateEpochMs,
  validateExactShape,
  validateId,
  validateLeaseDurationMs,
  validateOwner,
  validateRetryDelayMs,
  validateToken,
} from './validators';

/** Ask for the lease on a run's cancellation. Carries no time but the existing cancel-request fact. */
export interface ClaimCommand {
  readonly runId: string;
  readonly attemptId: string;
  /** Must equal the run's `cancel_requested_at_ms` exactly, or the claim is not_eligible. */
  readonly cancelRequestedAtMs: number;
  readonly owner: string;
  /** Fresh from createLeaseToken(); only its digest is stored. */
  readonly token: string;
  readonly leaseDurationMs: number;
}

/** Settle a lease. The fence is runId + attemptId + owner + token + expectedVersion, all exact. */
export interface RecordResultCommand {
  readonly runId: string;
  readonly attemptId: string;
  readonly owner: string;
  readonly token: string;
  /** The version of the record returned by the claim. */
  readonly expectedVersion: number;
  readonly result: DispatchResult;
  readonly eventId: string;
  /** Required for retryable results (retry_wait), refused for the others. */
  readonly retryDelayMs?: number;
}

/** The durable record (design/dispatch §2.1 plus project_id and blocked_at_ms); never the raw token. */
export interface CancellationDispatchRecord {
  readonly runId: string;
  readonly projectId: string;
  readonly attemptId: string;
  readonly status: DispatchStatus;
  readonly version: number;
  readonly dispatchCount: number;
  readonly nextAttemptAtMs: number | null;
  readonly leaseOwner: string | null;
  readonly leaseTokenDigest: string | null;
  readonly leaseExpiresAtMs: number | null;
  readonly lastResult: DispatchResult | null;
  readonly lastDispatchedAtMs: number | null;
  readonly blockedAtMs: number | null;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

/** Why a run cannot be claimed at all (design/dispatch §2.2 steps 1-2); low-sensitivity, no identifiers. */
export type NotEligibleReason =
  | 'run_missing'
  | 'run_not_runtime'
  | 'run_terminal'
  | 'cancel_not_requested'
  | 'cancel_mismatch'
  | 'attempt_missing'
  | 'attempt_inactive';

export type ClaimOutcome =
  | { readonly kind: 'claimed'; readonly record: CancellationDispatchRecord; readonly token: string }
  | { readonly kind: 'leased' }
  | { readonly kind: 'not_due' }
  | { readonly kind: 'dispatched' }
  | { readonly kind: 'blocked' }
  | { readonly kind: 'not_eligible'; readonly reason: NotEligibleReason }
  | { readonly kind: 'attempt_conflict' };

export type RecordResultOutcome =
  | { readonly kind: 'recorded'; readonly record: CancellationDispatchRecord; readonly event: RunEvent<DispatchEventPayload> }
  | { readonly kind: 'stale_fence' };

/** Keyset position in the due order `(atMs, runId)`. */
export interface DueCursor {
  readonly atMs: number;
  readonly runId: string;
}

export interface DuePageQuery {
  /** At most DUE_PAGE_MAX; DUE_PAGE_DEFAULT when omitted. */
  readonly limit?: number;
  /** The `next` cursor of the previous page; omitted for the first page. */
  readonly after?: DueCursor;
  /** Only cancellations of attempts this runner owns (docs/decisions/0070); omitted: every one. */
  readonly runnerId?: string;
}

/**
 * Where a due item came from: a cancelled run without a dispatch row yet (first claim), a leased
 * record whose lease expired (recovery), or a pending/retry_wait record whose due time passed.
 */
export type DueSource = 'first_claim' | 'lease_expired' | 'retry_due';

export interface DueItem {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
  readonly source: DueSource;
  /** The keyset time: cancel request time for first_claim / lease_expired, the due time for retry_due. */
  readonly atMs: number;
}

export interface DuePage {
  readonly items: readonly DueItem[];
  /** Present when the page was full (there may be more); strictly after the last item. */
  readonly next: DueCursor | null;
}

export function validateClaimCommand(value: unknown): ClaimCommand {
  const input = validateExactShape(value, 'claim command', ['runId', 'attemptId', 'cancelRequestedAtMs', 'owner', 'token', 'leaseDurationMs']);
  return {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    cancelRequestedAtMs: validateEpochMs(input.cancelRequestedAtMs, 'cancelRequestedAtMs'),
    owner: validateOwner(input.owner),
    token: validateToken(input.token),
    leaseDurationMs: validateLeaseDurationMs(input.leaseDurationMs),
  };
}

export function validateRecordResultCommand(value: unknown): RecordResultCommand {
  const input = validateExactShape(
    value,
    'result command',
    ['runId', 'attemptId', 'owner', 'token', 'expectedVersion', 'result', 'eventId'],
    ['retryDelayMs'],
  );
  const result = validateDispatchResult(input.result);
  const command = {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    owner: validateOwner(input.owner),
    token: validateToken(input.token),
    // A leased record has version >= 1: 0 can never match and is refused as a caller bug.
    expectedVersion: validateBoundedInteger(input.expectedVersion, 'expectedVersion', 1, Number.MAX_SAFE_INTEGER, 'ERR_PIDFENCE_INVALID_VERSION'),
    result,
    eventId: validateId(input.eventId, 'eventId'),
  };
  if (!classifyResult(result).retryable) {
    if (input.retryDelayMs !== undefined) {
      throw new PidfenceRangeError(`retryDelayMs is only for retryable results; ${result} is final, remove it.`, 'ERR_PIDFENCE_INVALID_RETRY_DELAY');
    }
    return command;
  }
  if (input.retryDelayMs === undefined) {
    throw new PidfenceRangeError(`${result} is retried: pass retryDelayMs (see backoffDelayMs()).`, 'ERR_PIDFENCE_INVALID_RETRY_DELAY');
  }
  return { ...command, retryDelayMs: validateRetryDelayMs(input.retryDelayMs) };
}

export function validateDueCursor(value: unknown): DueCursor {
  const input = validateExactShape(value, 'due cursor', ['atMs', 'runId']);
  return { atMs: validateEpochMs(input.atMs, 'cursor atMs'), runId: validateId(input.runId, 'cursor runId') };
}

/** Normalises a due-page query: the limit defaults to 32 and may never exceed 64 (design/dispatch §2.6). */
export function validateDuePageQuery(value: unknown = {}): { readonly limit: number; readonly after: DueCursor | null; readonly runnerId: string | null } {
  const input = validateExactShape(value, 'due page query', [], ['limit', 'after', 'runnerId']);
  const limit = input.limit === undefined
    ? DUE_PAGE_DEFAULT
    : validateBoundedInteger(input.limit, 'limit', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  return {
    limit,
    after: input.after === undefined ? null : validateDueCursor(input.after),
    runnerId: input.runnerId === undefined ? null : validateId(input.runnerId, 'runnerId'),
  };
}

const nullableEpoch = nullableField(validateEpochMs);

/**
 * Checks a record read from a store: field types and the status/lease/retry/terminal shape that the
 * schema's CHECK constraints also hold. Stores call it at the boundary, so corruption fails closed.
 */
export const validateDispatchRecord: (value: unknown) => CancellationDispatchRecord = storedRecordValidator<CancellationDispatchRecord>('dispatch record', {
  runId: validateId,
  projectId: validateId,
  attemptId: validateId,
  status: enumField(DISPATCH_STATUSES),
  version: validateCounter,
  dispatchCount: validateCounter,
  nextAttemptAtMs: nullableEpoch,
  leaseOwner: nullableField(validateOwner),
  leaseTokenDigest: nullableField(validateDigest),
  leaseExpiresAtMs: nullableEpoch,
  lastResult: nullableField(enumField(DISPATCH_RESULTS)),
  lastDispatchedAtMs: nullableEpoch,
  blockedAtMs: nullableEpoch,
  createdAtMs: validateEpochMs,
  updatedAtMs: validateEpochMs,
}, checkStateShape);

function settledAs(record: CancellationDispatchRecord, status: 'dispatched' | 'blocked'): boolean {
  return record.lastResult !== null && classifyResult(record.lastResult).status === status;
}

/** The status/lease/retry/terminal shape, the same rules as the schema's CHECK constraints. */
export function checkStateShape(record: CancellationDispatchRecord, invariant: (holds: boolean, rule: string) => void): void {
  const hasLease = record.leaseOwner !== null && record.leaseTokenDigest !== null && record.leaseExpiresAtMs !== null;
  const noLease = record.leaseOwner === null && record.leaseTokenDigest === null && record.leaseExpiresAtMs === null;
  invariant(record.dispatchCount <= record.version, 'dispatch_count never exceeds version');
  switch (record.status) {
    case 'pending':
      invariant(noLease && record.nextAttemptAtMs !== null && record.blockedAtMs === null, 'a pending record has a due time and no lease');
      break;
    case 'leased':
      invariant(hasLease && record.nextAttemptAtMs === null && record.blockedAtMs === null && record.dispatchCount >= 1, 'a leased record has owner, digest and expiry, and no due time');
      break;
    case 'retry_wait':
      invariant(noLease && record.nextAttemptAtMs !== null && record.blockedAtMs === null && record.lastResult !== null, 'a retry_wait record has a due time, a last result and no lease');
      break;
    case 'dispatched':
      invariant(noLease && record.nextAttemptAtMs === null && record.blockedAtMs === null && settledAs(record, 'dispatched'), 'a dispatched record has a dispatching last result, no lease and no due time');
      break;
    case 'blocked':
      invariant(noLease && record.nextAttemptAtMs === null && record.blockedAtMs !== null && settledAs(record, 'blocked'), 'a blocked record has a blocking last result, blocked_at_ms and no lease');
      break;
  }
}
