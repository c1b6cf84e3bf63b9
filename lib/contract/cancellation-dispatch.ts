// The canonical CancellationDispatch contract (design/dispatch §2.1-2.4, design/postgres §D1-D2): exact-shape
// commands, the record and its state invariants, claim/result outcomes, and the due-page query.
import { PidfenceRangeError } from '../base/errors';
import {
  classifyResult,
  DISPATCH_RESULTS,
  DISPATCH_STATUSES,
  type DispatchResult,
  type DispatchStatus,
} from './classification';
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
  | {
      readonly kind: 'recorded';
      readonly record: CancellationDispatchRecord;
      readonly event: RunEvent<DispatchEventPayload>;
    }
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
 * Where a due item came from: a pending record, written with the cancel request and never claimed
 * (first claim), a leased record whose lease expired (recovery), or a retry_wait record whose due
 * time passed (docs/decisions/0022).
 */
export type DueSource = 'first_claim' | 'lease_expired' | 'retry_due';

export interface DueItem {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
  readonly source: DueSource;
  /** The keyset time: cancel request time for first_claim, lease expiry for lease_expired, the due time for retry_due. */
  readonly atMs: number;
}

export interface DuePage {
  readonly items: readonly DueItem[];
  /** Present when the page was full (there may be more); strictly after the last item. */
  readonly next: DueCursor | null;
}

export function validateClaimCommand(value: unknown): ClaimCommand {
  const input = validateExactShape(value, 'claim command', [
    'runId',
    'attemptId',
    'cancelRequestedAtMs',
    'owner',
    'token',
    'leaseDurationMs',
  ]);
  return {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    cancelRequestedAtMs: validateEpochMs(input.cancelRequestedAtMs, 'cancelRequestedAtMs'),
    owner: validateOwner(input.owner),
    token: validateToken(input.token),
    leaseDurationMs: validateLeaseDurationMs(input.leaseDurationMs),
  };
}

/**
 * Claim a supervisor page at once (docs/decisions/0023): one transaction, each item fenced as its
 * own claim, each with its own token. One owner and lease duration for the page.
 */
export interface ClaimPageCommand {
  readonly owner: string;
  readonly leaseDurationMs: number;
  /** 1 to DUE_PAGE_MAX items, distinct runs. */
  readonly items: ReadonlyArray<Pick<ClaimCommand, 'runId' | 'attemptId' | 'cancelRequestedAtMs' | 'token'>>;
}

/** The page as one claim command per item, in the page's order. */
export function validateClaimPageCommand(value: unknown): ClaimCommand[] {
  const input = validateExactShape(value, 'claim page command', ['owner', 'leaseDurationMs', 'items']);
  if (!Array.isArray(input.items))
    throw new PidfenceRangeError(
      'claim page items must be an array of claims; pass the due items to claim.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  validateBoundedInteger(input.items.length, 'claim page size', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  const commands = (input.items as unknown[]).map((item) =>
    validateClaimCommand({ ...(item as object), owner: input.owner, leaseDurationMs: input.leaseDurationMs }),
  );
  if (new Set(commands.map((command) => command.runId)).size !== commands.length) {
    throw new PidfenceRangeError(
      'a claim page names a run twice; claim each run once per page.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  return commands;
}

/**
 * Read the next due page and claim its items in the same transaction (docs/decisions/0025): the
 * due page of `duePage` for `tokens.length` items, each item claimed as its own `claim` with the
 * token of its position.
 */
export interface ClaimDuePageCommand {
  readonly owner: string;
  readonly leaseDurationMs: number;
  /** One fresh token per item the page may hold: 1 to DUE_PAGE_MAX, distinct; the page limit. */
  readonly tokens: readonly string[];
  /** The `next` cursor of the previous page; omitted for the first page. */
  readonly after?: DueCursor;
  /** Only cancellations of attempts this runner owns (docs/decisions/0070); omitted: every one. */
  readonly runnerId?: string;
}

/**
 * A due item and what its claim decided; `passed_over` when another transaction held its run at
 * that moment (a store with row locks does not wait for it: the next cycle reads it again if it is
 * still due). A passed-over item was not claimed and nothing of it changed.
 */
export interface ClaimedDueItem {
  readonly item: DueItem;
  readonly outcome: ClaimOutcome | { readonly kind: 'passed_over' };
}

export interface ClaimedDuePage {
  /** In due order, as `duePage` would list them; at most `tokens.length`. */
  readonly items: readonly ClaimedDueItem[];
  /** As `duePage`: present when the page was full, strictly after the last item. */
  readonly next: DueCursor | null;
}

export function validateClaimDuePageCommand(value: unknown): {
  readonly owner: string;
  readonly leaseDurationMs: number;
  readonly tokens: readonly string[];
  readonly after: DueCursor | null;
  readonly runnerId: string | null;
} {
  const input = validateExactShape(
    value,
    'claim due page command',
    ['owner', 'leaseDurationMs', 'tokens'],
    ['after', 'runnerId'],
  );
  if (!Array.isArray(input.tokens))
    throw new PidfenceRangeError(
      'tokens must be an array of fresh lease tokens, one per item the page may claim.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  validateBoundedInteger(input.tokens.length, 'claim page size', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  const tokens = (input.tokens as unknown[]).map(validateToken);
  if (new Set(tokens).size !== tokens.length) {
    throw new PidfenceRangeError(
      'a claim due page repeats a token; create one fresh token per item.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  const query = validateDuePageQuery({
    limit: tokens.length,
    ...(input.after === undefined ? {} : { after: input.after }),
    ...(input.runnerId === undefined ? {} : { runnerId: input.runnerId }),
  });
  return {
    owner: validateOwner(input.owner),
    leaseDurationMs: validateLeaseDurationMs(input.leaseDurationMs),
    tokens,
    after: query.after,
    runnerId: query.runnerId,
  };
}

/** 1 to DUE_PAGE_MAX attempt references (a dispatcher's claimed page), each id checked. */
export function validateAttemptRefs(value: unknown): Array<{ runId: string; attemptId: string }> {
  if (!Array.isArray(value))
    throw new PidfenceRangeError(
      'attempt references must be an array of { runId, attemptId }.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  validateBoundedInteger(value.length, 'attempt references', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  return (value as unknown[]).map((ref) => {
    const input = validateExactShape(ref, 'attempt reference', ['runId', 'attemptId']);
    return { runId: validateId(input.runId, 'runId'), attemptId: validateId(input.attemptId, 'attemptId') };
  });
}

/** Settle a page's claims at once (docs/decisions/0023): 1 to DUE_PAGE_MAX results of distinct runs, each with its own fence. */
export function validateRecordResultsCommand(value: unknown): RecordResultCommand[] {
  if (!Array.isArray(value))
    throw new PidfenceRangeError(
      'results must be an array of result commands; pass one per claimed run.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  validateBoundedInteger(value.length, 'result page size', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  const commands = (value as unknown[]).map(validateRecordResultCommand);
  if (new Set(commands.map((command) => command.runId)).size !== commands.length) {
    throw new PidfenceRangeError(
      'a result page names a run twice; settle each run once per page.',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  return commands;
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
    expectedVersion: validateBoundedInteger(
      input.expectedVersion,
      'expectedVersion',
      1,
      Number.MAX_SAFE_INTEGER,
      'ERR_PIDFENCE_INVALID_VERSION',
    ),
    result,
    eventId: validateId(input.eventId, 'eventId'),
  };
  if (!classifyResult(result).retryable) {
    if (input.retryDelayMs !== undefined) {
      throw new PidfenceRangeError(
        `retryDelayMs is only for retryable results; ${result} is final, remove it.`,
        'ERR_PIDFENCE_INVALID_RETRY_DELAY',
      );
    }
    return command;
  }
  if (input.retryDelayMs === undefined) {
    throw new PidfenceRangeError(
      `${result} is retried: pass retryDelayMs (see backoffDelayMs()).`,
      'ERR_PIDFENCE_INVALID_RETRY_DELAY',
    );
  }
  return { ...command, retryDelayMs: validateRetryDelayMs(input.retryDelayMs) };
}

export function validateDueCursor(value: unknown): DueCursor {
  const input = validateExactShape(value, 'due cursor', ['atMs', 'runId']);
  return { atMs: validateEpochMs(input.atMs, 'cursor atMs'), runId: validateId(input.runId, 'cursor runId') };
}

/** Normalises a due-page query: the limit defaults to 32 and may never exceed 64 (design/dispatch §2.6). */
export function validateDuePageQuery(value: unknown = {}): {
  readonly limit: number;
  readonly after: DueCursor | null;
  readonly runnerId: string | null;
} {
  const input = validateExactShape(value, 'due page query', [], ['limit', 'after', 'runnerId']);
  const limit =
    input.limit === undefined
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
export const validateDispatchRecord: (value: unknown) => CancellationDispatchRecord =
  storedRecordValidator<CancellationDispatchRecord>(
    'dispatch record',
    {
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
    },
    checkStateShape,
  );

function settledAs(record: CancellationDispatchRecord, status: 'dispatched' | 'blocked'): boolean {
  return record.lastResult !== null && classifyResult(record.lastResult).status === status;
}

/** The status/lease/retry/terminal shape, the same rules as the schema's CHECK constraints. */
export function checkStateShape(
  record: CancellationDispatchRecord,
  invariant: (holds: boolean, rule: string) => void,
): void {
  const hasLease = record.leaseOwner !== null && record.leaseTokenDigest !== null && record.leaseExpiresAtMs !== null;
  const noLease = record.leaseOwner === null && record.leaseTokenDigest === null && record.leaseExpiresAtMs === null;
  invariant(record.dispatchCount <= record.version, 'dispatch_count never exceeds version');
  switch (record.status) {
    case 'pending':
      invariant(
        noLease && record.nextAttemptAtMs !== null && record.blockedAtMs === null,
        'a pending record has a due time and no lease',
      );
      break;
    case 'leased':
      invariant(
        hasLease && record.nextAttemptAtMs === null && record.blockedAtMs === null && record.dispatchCount >= 1,
        'a leased record has owner, digest and expiry, and no due time',
      );
      break;
    case 'retry_wait':
      invariant(
        noLease && record.nextAttemptAtMs !== null && record.blockedAtMs === null && record.lastResult !== null,
        'a retry_wait record has a due time, a last result and no lease',
      );
      break;
    case 'dispatched':
      invariant(
        noLease && record.nextAttemptAtMs === null && record.blockedAtMs === null && settledAs(record, 'dispatched'),
        'a dispatched record has a dispatching last result, no lease and no due time',
      );
      break;
    case 'blocked':
      invariant(
        noLease && record.nextAttemptAtMs === null && record.blockedAtMs !== null && settledAs(record, 'blocked'),
        'a blocked record has a blocking last result, blocked_at_ms and no lease',
      );
      break;
  }
}
