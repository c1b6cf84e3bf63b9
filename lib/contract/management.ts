// The management plane's contract (design/dispatch §5, gates 14-18):
// permissions, the low-sensitivity inspection, the rearm command and outcomes, summary counts and
// the blocked-page cursor. Pure: no I/O. Nothing here can carry a lease owner, token or digest.
import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { DISPATCH_RESULTS, RESULT_CLASSIFICATION, type DispatchResult, type DispatchStatus } from './classification';
import type { CancellationDispatchRecord } from './cancellation-dispatch';
import type { DispatchEventPayload, RunEvent } from './events';
import { CLUSTER_SCOPE } from './fleet';
import { validateRunStatus, type RunStatus } from './run';
import { BLOCKED_PAGE_SIZE, EPOCH_MS_MAX, LEASE_DURATION_MAX_MS, OWNER_MAX_LENGTH } from './limits';
import { validateBoundedInteger, validateEnum, validateEpochMs, validateExactShape, validateId } from './validators';

/**
 * Per-project permissions (design/dispatch §5.1): `run.read` sees diagnostics, `run.stop` may rearm, and
 * `grants.write` may give and take permissions on the project (docs/decisions/0040). The worker
 * permissions hold on the cluster scope only (`@cluster`, docs/decisions/0244): `worker.read` lists the
 * fleet, `worker.manage` cordons, drains and revokes workers.
 */
export const PERMISSIONS = ['run.read', 'run.stop', 'grants.write', 'worker.read', 'worker.manage'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** The permissions that hold on the cluster scope rather than on a project. */
export const WORKER_PERMISSIONS: readonly Permission[] = ['worker.read', 'worker.manage'];

/** The results that block a dispatch (design/dispatch §2.4), in table order. */
export const BLOCKING_RESULTS = DISPATCH_RESULTS.filter(
  (result) => RESULT_CLASSIFICATION[result].status === 'blocked',
) as readonly BlockingResult[];
export type BlockingResult = 'identity_mismatch' | 'pid_mismatch' | 'unsupported' | 'invalid';

/**
 * A due dispatch (or an expired lease) older than this means the dispatcher is not keeping up
 * (design/dispatch §5.2): the summary says attention_required. The default outlasts the longest lease.
 */
export const OVERDUE_AFTER_DEFAULT_MS = LEASE_DURATION_MAX_MS;
export const OVERDUE_AFTER_MIN_MS = 1_000;
export const OVERDUE_AFTER_MAX_MS = 7 * 24 * 60 * 60 * 1000;

/** A subject is a principal's stable name: an OS user, a service account, an e-mail. */
const SUBJECT_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,${OWNER_MAX_LENGTH - 1}}$`);

export function validateSubject(value: unknown): string {
  if (typeof value !== 'string' || !SUBJECT_PATTERN.test(value)) {
    throw new PidfenceRangeError(
      `subject must be 1 to ${OWNER_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : @ / - starting with a letter or digit.`,
      'ERR_PIDFENCE_INVALID_SUBJECT',
    );
  }
  return value;
}

export function validatePermission(value: unknown): Permission {
  return validateEnum(value, 'permission', PERMISSIONS, 'ERR_PIDFENCE_INVALID_PERMISSION');
}

/**
 * Where a grant of `permission` may be given (docs/decisions/0244): a worker permission on the cluster
 * scope only; on the cluster scope nothing but the worker permissions and grants.write; elsewhere a project id.
 */
export function validateGrantScope(scope: unknown, permission: Permission): string {
  const worker = WORKER_PERMISSIONS.includes(permission);
  if (scope === CLUSTER_SCOPE) {
    if (worker || permission === 'grants.write') return CLUSTER_SCOPE;
    throw new PidfenceRangeError(
      `${permission} is a project's permission; give it on a project, not on ${CLUSTER_SCOPE}.`,
      'ERR_PIDFENCE_GRANT_SCOPE',
    );
  }
  if (worker)
    throw new PidfenceRangeError(
      `${permission} holds for the whole fleet: give it on ${CLUSTER_SCOPE}, not on a project.`,
      'ERR_PIDFENCE_GRANT_SCOPE',
    );
  return validateId(scope, 'project');
}

export function validateOverdueAfterMs(value: unknown): number {
  return validateBoundedInteger(
    value,
    'overdueAfterMs',
    OVERDUE_AFTER_MIN_MS,
    OVERDUE_AFTER_MAX_MS,
    'ERR_PIDFENCE_INVALID_OVERDUE_BOUND',
  );
}

export const INSPECTION_KEYS = [
  'runId',
  'projectId',
  'attemptId',
  'status',
  'version',
  'dispatchCount',
  'lastResult',
  'nextAttemptAtMs',
  'blockedAtMs',
  'lastDispatchedAtMs',
  'updatedAtMs',
] as const satisfies ReadonlyArray<keyof CancellationDispatchRecord>;

/** What inspect shows (design/dispatch §5.1): low-sensitivity facts only, never lease owner, token or digest. */
export type DispatchInspection = Pick<CancellationDispatchRecord, (typeof INSPECTION_KEYS)[number]>;

/** The caller's fence for a rearm: exactly the blocked record it inspected. */
export interface RearmExpectation {
  readonly expectedVersion: number;
  readonly expectedStatus: 'blocked';
  readonly expectedResult: BlockingResult;
}

export function validateRearmExpectation(value: unknown): RearmExpectation {
  const input = validateExactShape(value, 'rearm expectation', ['expectedVersion', 'expectedStatus', 'expectedResult']);
  return {
    // A blocked record has been claimed and settled: version >= 2.
    expectedVersion: validateBoundedInteger(
      input.expectedVersion,
      'expectedVersion',
      1,
      Number.MAX_SAFE_INTEGER,
      'ERR_PIDFENCE_INVALID_VERSION',
    ),
    expectedStatus: validateEnum(
      input.expectedStatus,
      'expectedStatus',
      ['blocked'] as const,
      'ERR_PIDFENCE_INVALID_COMMAND',
    ),
    expectedResult: validateEnum(
      input.expectedResult,
      'expectedResult',
      BLOCKING_RESULTS,
      'ERR_PIDFENCE_INVALID_RESULT',
    ),
  };
}

/** What the store's rearm transaction receives; the subject's run.stop is re-checked inside it. */
export interface RearmCommand {
  readonly runId: string;
  readonly subject: string;
  /** Who the audit row names; defaults to `subject`, and is "A acting as B" under impersonation. */
  readonly actor?: string;
  readonly expectedVersion: number;
  readonly expectedResult: BlockingResult;
  readonly eventId: string;
  readonly auditId: string;
}

export type RearmOutcome =
  | {
      readonly kind: 'rearmed';
      readonly inspection: DispatchInspection;
      readonly event: RunEvent<DispatchEventPayload>;
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'not_permitted' }
  | { readonly kind: 'not_blocked'; readonly status: DispatchStatus }
  | { readonly kind: 'stale_version'; readonly version: number }
  | { readonly kind: 'result_mismatch'; readonly lastResult: DispatchResult | null };

/** The five dispatch states, in contract order. */
export type StateCounts = Readonly<Record<DispatchStatus, number>>;
export type BlockingCounts = Readonly<Record<BlockingResult, number>>;

/** The one summary read (design/dispatch §5.2): the grant check and every count from one statement. */
export interface SummaryCounts {
  /** Whether the subject holds run.read on the project, read by the same statement. */
  readonly permitted: boolean;
  readonly asOfMs: number;
  readonly total: number;
  readonly states: StateCounts;
  readonly blockingResults: BlockingCounts;
  /** Due (or lease-expired) records older than the overdue bound, of runs still active. */
  readonly overdue: number;
  /** Pending, leased or retry_wait records whose run has already ended: nothing is left to stop. */
  readonly runEnded: number;
  /** The project's attempts whose job is running (a count, never which). */
  readonly running: number;
}

export type Assessment = 'clear' | 'converging' | 'attention_required';

/** A blocked-page row: run identity and blocked time only (design/dispatch §5.4). */
export interface BlockedItem {
  readonly runId: string;
  readonly blockedAtMs: number;
}

/** The decoded blocked-page cursor: the project, the first page's database time, the keyset position. */
export interface BlockedCursor {
  readonly projectId: string;
  readonly asOfMs: number;
  readonly after: BlockedItem;
}

export { BLOCKED_PAGE_SIZE };

const BLOCKED_CURSOR_PREFIX = 'bp1.';
const CURSOR_TEXT_MAX = 1024;

/** A cursor is a versioned prefix and a base64url JSON array: opaque to callers, a position to us. */
function encodeCursor(prefix: string, body: readonly unknown[]): string {
  return prefix + Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** The cursor's array of `length` values, or null for anything pidfence did not write. */
function decodeCursorBody(text: unknown, prefix: string, length: number): unknown[] | null {
  if (typeof text !== 'string' || !text.startsWith(prefix) || text.length > CURSOR_TEXT_MAX) return null;
  try {
    const body: unknown = JSON.parse(Buffer.from(text.slice(prefix.length), 'base64url').toString('utf8'));
    return Array.isArray(body) && body.length === length ? body : null;
  } catch {
    return null;
  }
}

export function encodeBlockedCursor(cursor: BlockedCursor): string {
  return encodeCursor(BLOCKED_CURSOR_PREFIX, [
    cursor.projectId,
    cursor.asOfMs,
    cursor.after.blockedAtMs,
    cursor.after.runId,
  ]);
}

function badCursor(list: string, command: string): PidfenceError {
  return new PidfenceError(
    `the ${list} cursor is not one pidfence returned; pass the \`next\` value of the previous ${command} page unchanged, or omit it for the first page.`,
    'ERR_PIDFENCE_INVALID_CURSOR',
  );
}

export function decodeBlockedCursor(text: unknown): BlockedCursor {
  const body = decodeCursorBody(text, BLOCKED_CURSOR_PREFIX, 4);
  if (body === null) throw badCursor('blocked-page', 'blocked');
  try {
    const [projectId, asOfMs, blockedAtMs, runId] = body;
    const cursor = {
      projectId: validateId(projectId, 'cursor project'),
      asOfMs: validateEpochMs(asOfMs, 'cursor time'),
      after: { blockedAtMs: validateEpochMs(blockedAtMs, 'cursor time'), runId: validateId(runId, 'cursor run') },
    };
    if (cursor.after.blockedAtMs > cursor.asOfMs || cursor.asOfMs > EPOCH_MS_MAX)
      throw badCursor('blocked-page', 'blocked');
    return cursor;
  } catch {
    throw badCursor('blocked-page', 'blocked');
  }
}

/** Where a run-list page ends: the last run shown, in (createdAtMs, runId) order, newest first. */
export interface RunListPosition {
  readonly createdAtMs: number;
  readonly runId: string;
}

/**
 * The decoded run-list cursor (docs/decisions/0140): the project and state filter it was made for,
 * and the last run of the previous page. The list is newest first and a run's creation time never
 * changes, so a run created during a walk appears only before its first page: nothing is pinned.
 */
export interface RunListCursor {
  readonly projectId: string;
  readonly status: RunStatus | null;
  readonly after: RunListPosition;
}

const RUN_LIST_CURSOR_PREFIX = 'rl1.';

export function encodeRunListCursor(cursor: RunListCursor): string {
  return encodeCursor(RUN_LIST_CURSOR_PREFIX, [
    cursor.projectId,
    cursor.status,
    cursor.after.createdAtMs,
    cursor.after.runId,
  ]);
}

export function decodeRunListCursor(text: unknown): RunListCursor {
  const body = decodeCursorBody(text, RUN_LIST_CURSOR_PREFIX, 4);
  if (body === null) throw badCursor('run-list', 'list');
  try {
    const [projectId, status, createdAtMs, runId] = body;
    return {
      projectId: validateId(projectId, 'cursor project'),
      status: status === null ? null : validateRunStatus(status),
      after: { createdAtMs: validateEpochMs(createdAtMs, 'cursor time'), runId: validateId(runId, 'cursor run') },
    };
  } catch {
    throw badCursor('run-list', 'list');
  }
}
