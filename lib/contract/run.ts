// Runs and attempts as the run store sees them (design/architecture §5, design/dispatch §2.2 steps 1-2, design/execution §3):
// exact-shape commands and their validators, shared by the SQLite and PostgreSQL run stores.
import { HANDLE_MAX_BYTES, PID_MAX } from '../base/limits';
import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { CANCEL_REASONS, type CancelReason, type RunEvent } from './events';
import { DUE_PAGE_MAX, EPOCH_MS_MAX } from './limits';
import {
  enumField,
  nullableField,
  storedRecordValidator,
  validateBoundedInteger,
  validateCounter,
  validateDigest,
  validateEnum,
  validateEpochMs,
  validateExactShape,
  validateId,
  validateRunPage,
} from './validators';

export const RUN_OWNERS = ['runtime', 'external'] as const;
export type RunOwner = (typeof RUN_OWNERS)[number];

export const RUN_ACTIVE_STATUSES = ['queued', 'running'] as const;
export const RUN_TERMINAL_STATUSES = ['succeeded', 'failed', 'cancelled', 'timed_out'] as const;
export type RunTerminalStatus = (typeof RUN_TERMINAL_STATUSES)[number];
export type RunStatus = (typeof RUN_ACTIVE_STATUSES)[number] | RunTerminalStatus;
/** Every run status, active first: what `pidfence list --state` accepts. */
export const RUN_STATUSES: readonly RunStatus[] = [...RUN_ACTIVE_STATUSES, ...RUN_TERMINAL_STATUSES];

export function validateRunStatus(value: unknown): RunStatus {
  return validateEnum(value, 'state', RUN_STATUSES, 'ERR_PIDFENCE_INVALID_RUN_STATUS');
}

/** True while a run can still change (and be cancelled); both stores and the claim rules ask this. */
export function runIsActive(status: string): boolean {
  return (RUN_ACTIVE_STATUSES as readonly string[]).includes(status);
}

/** claimed/starting/running are active (design/dispatch §2.2 step 2); at most one per run. */
export const ATTEMPT_ACTIVE_STATUSES = ['claimed', 'starting', 'running'] as const;
export type AttemptActiveStatus = (typeof ATTEMPT_ACTIVE_STATUSES)[number];
export type AttemptStatus = AttemptActiveStatus | RunTerminalStatus;

/** The durable handle is opaque here (lib/process parses it); this only bounds its size. */
/** What a stored handle may be at most (the canonical v1 handle); the column allows more. */
export const HANDLE_MAX_LENGTH = HANDLE_MAX_BYTES;
/** PID_MAX_LIMIT on 64-bit Linux. */
export const ATTEMPT_PID_MAX = PID_MAX;
/** An attempt deadline is at most a week ahead; longer runs renew it explicitly. */
export const ATTEMPT_TIMEOUT_MAX_MS = 7 * 24 * 60 * 60 * 1000;
/** Event listing page (tests, inspect): bounded like every other read. */
export const EVENT_PAGE_MAX = 256;

export interface RunRecord {
  readonly runId: string;
  readonly projectId: string;
  readonly owner: RunOwner;
  readonly status: RunStatus;
  readonly version: number;
  readonly cancelRequestedAtMs: number | null;
  readonly cancelReason: CancelReason | null;
  readonly nextEventSeq: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

/** The end a run's cancel intent gives it: `timed_out` for a timeout, `cancelled` for every other reason. */
export function cancelIntentStatus(run: Pick<RunRecord, 'cancelReason'>): RunTerminalStatus {
  return run.cancelReason === 'timeout' ? 'timed_out' : 'cancelled';
}

/**
 * The end of an attempt that never started (docs/decisions/0310, 0440): `failed`, or what the run's
 * cancel intent says when it has one. The one rule of the local completion processor and of the
 * terminal CAS, which applies it again under the run lock for every store and the cluster.
 */
export function neverStartedStatus(run: Pick<RunRecord, 'cancelRequestedAtMs' | 'cancelReason'>): RunTerminalStatus {
  return run.cancelRequestedAtMs === null ? 'failed' : cancelIntentStatus(run);
}

export interface AttemptRecord {
  readonly attemptId: string;
  readonly runId: string;
  readonly status: AttemptStatus;
  readonly pid: number | null;
  readonly handle: string | null;
  readonly deadlineAtMs: number | null;
  readonly receiptTokenDigest: string | null;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

export interface CreateRunCommand {
  readonly runId: string;
  readonly projectId: string;
  /** Defaults to `runtime`: only runtime-owned runs can be claimed for cancellation. */
  readonly owner?: RunOwner;
  /** A label for people (`run --name`, docs/decisions/0251); not unique, never an identity. */
  readonly name?: string;
}

export interface CreateAttemptCommand {
  readonly runId: string;
  readonly attemptId: string;
  /** Relative, like every duration in the contract: the store computes the absolute deadline. */
  readonly timeoutMs?: number;
  /** SHA-256 of the completion-receipt token (design/execution §2); the raw token never reaches the store. */
  readonly receiptTokenDigest?: string;
  /** The runner that owns the attempt (docs/decisions/0070); absent for attempts no runner executes. */
  readonly runnerId?: string;
  /**
   * What its launcher does with processes the job leaves behind (docs/decisions/0302): recorded so
   * `show` can say a `keep` was chosen; absent: not stated (the default, `stop`).
   */
  readonly leftovers?: AttemptLeftoverPolicy;
}

/** The leftover policies an attempt may record (the launcher's, lib/execution/launch-order.ts). */
export const ATTEMPT_LEFTOVER_POLICIES = ['stop', 'keep'] as const;
export type AttemptLeftoverPolicy = (typeof ATTEMPT_LEFTOVER_POLICIES)[number];

export interface AdvanceAttemptCommand {
  readonly runId: string;
  readonly attemptId: string;
  readonly from: AttemptActiveStatus;
  readonly to: 'starting' | 'running';
  /** Given together: the spawned PID and its durable handle, captured right after spawn. */
  readonly pid?: number;
  readonly handle?: string;
}

export interface EndAttemptCommand {
  readonly runId: string;
  readonly attemptId: string;
  /** The attempt ends; the run stays active (a later attempt may follow). */
  readonly status: RunTerminalStatus;
}

export interface RequestCancellationCommand {
  readonly runId: string;
  readonly reason: CancelReason;
  readonly eventId: string;
}

/** A project-wide cancel (docs/decisions/0203, 0320): every active runtime run of the project, a bounded page at a time. */
export interface ProjectCancellationCommand {
  readonly projectId: string;
  readonly reason: CancelReason;
}

/** New intents written, queued runs ended `cancelled`, and whether a repeat has more to do. */
export interface ProjectCancellationOutcome {
  readonly requested: number;
  readonly cancelledQueued: number;
  readonly more: boolean;
}

export interface MarkTerminalCommand {
  readonly runId: string;
  readonly status: RunTerminalStatus;
  readonly eventId: string;
  /** The attempt that ended with the run, set to the same terminal status. */
  readonly attemptId?: string;
}

export type CreateRunOutcome = { readonly kind: 'created'; readonly run: RunRecord } | { readonly kind: 'exists' };
export type CreateAttemptOutcome =
  | { readonly kind: 'created'; readonly attempt: AttemptRecord }
  | { readonly kind: 'run_missing' | 'run_terminal' | 'active_attempt_exists' | 'exists' };
export type AdvanceAttemptOutcome =
  { readonly kind: 'advanced'; readonly attempt: AttemptRecord } | { readonly kind: 'stale' };
export type EndAttemptOutcome =
  { readonly kind: 'ended'; readonly attempt: AttemptRecord } | { readonly kind: 'stale' };
export type RequestCancellationOutcome =
  | { readonly kind: 'requested'; readonly run: RunRecord; readonly event: RunEvent<{ readonly reason: CancelReason }> }
  /** An existing intent is kept, reason and time unchanged (design/execution §5). */
  | { readonly kind: 'already_requested'; readonly run: RunRecord }
  | { readonly kind: 'run_missing' | 'run_terminal' };
export type MarkTerminalOutcome =
  | {
      readonly kind: 'terminal';
      readonly run: RunRecord;
      readonly event: RunEvent<{ readonly status: RunTerminalStatus }>;
    }
  | { readonly kind: 'already_terminal'; readonly run: RunRecord }
  | { readonly kind: 'run_missing' | 'attempt_missing' };

const HANDLE_PATTERN = /^[\x20-\x7e]+$/;

/** A run's name (docs/decisions/0251): shown unquoted in tables, shells, URLs and HTML, so a closed ASCII set. */
export const RUN_NAME_MAX_LENGTH = 64;
export const RUN_NAME_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,${RUN_NAME_MAX_LENGTH - 1}}$`);

export function validateRunName(value: unknown): string {
  if (typeof value !== 'string' || !RUN_NAME_PATTERN.test(value)) {
    throw new PidfenceRangeError(
      `a run name is 1 to ${RUN_NAME_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : @ - starting with a letter or digit (no spaces); e.g. nightly-backup.`,
      'ERR_PIDFENCE_INVALID_RUN_NAME',
    );
  }
  return value;
}

export function validateCreateRunCommand(value: unknown): CreateRunCommand {
  const input = validateExactShape(value, 'create-run command', ['runId', 'projectId'], ['owner', 'name']);
  let command: CreateRunCommand = {
    runId: validateId(input.runId, 'runId'),
    projectId: validateId(input.projectId, 'projectId'),
  };
  if (input.owner !== undefined)
    command = { ...command, owner: validateEnum(input.owner, 'owner', RUN_OWNERS, 'ERR_PIDFENCE_INVALID_RUN_OWNER') };
  if (input.name !== undefined) command = { ...command, name: validateRunName(input.name) };
  return command;
}

export function validateCreateAttemptCommand(value: unknown): CreateAttemptCommand {
  const input = validateExactShape(
    value,
    'create-attempt command',
    ['runId', 'attemptId'],
    ['timeoutMs', 'receiptTokenDigest', 'runnerId', 'leftovers'],
  );
  let command: CreateAttemptCommand = {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
  };
  if (input.timeoutMs !== undefined) {
    command = {
      ...command,
      timeoutMs: validateBoundedInteger(
        input.timeoutMs,
        'timeoutMs',
        1,
        ATTEMPT_TIMEOUT_MAX_MS,
        'ERR_PIDFENCE_INVALID_TIMEOUT',
      ),
    };
  }
  if (input.receiptTokenDigest !== undefined) {
    command = { ...command, receiptTokenDigest: validateDigest(input.receiptTokenDigest, 'receiptTokenDigest') };
  }
  if (input.runnerId !== undefined) command = { ...command, runnerId: validateId(input.runnerId, 'runnerId') };
  if (input.leftovers !== undefined)
    command = {
      ...command,
      leftovers: validateEnum(input.leftovers, 'leftovers', ATTEMPT_LEFTOVER_POLICIES, 'ERR_PIDFENCE_INVALID_COMMAND'),
    };
  return command;
}

function validateHandle(value: unknown): string {
  if (typeof value !== 'string')
    throw new PidfenceTypeError(
      'handle must be the durable handle text from lib/process.',
      'ERR_PIDFENCE_INVALID_HANDLE',
    );
  if (value.length > HANDLE_MAX_LENGTH || !HANDLE_PATTERN.test(value)) {
    throw new PidfenceRangeError(
      `handle must be 1 to ${HANDLE_MAX_LENGTH} printable ASCII characters.`,
      'ERR_PIDFENCE_INVALID_HANDLE',
    );
  }
  return value;
}

/** Forward-only moves: claimed → starting → running (claimed → running is allowed too). */
const ATTEMPT_MOVES: Readonly<Record<AttemptActiveStatus, readonly string[]>> = {
  claimed: ['starting', 'running'],
  starting: ['running'],
  running: [],
};

export function validateAdvanceAttemptCommand(value: unknown): AdvanceAttemptCommand {
  const input = validateExactShape(
    value,
    'advance-attempt command',
    ['runId', 'attemptId', 'from', 'to'],
    ['pid', 'handle'],
  );
  const from = validateEnum(input.from, 'from', ATTEMPT_ACTIVE_STATUSES, 'ERR_PIDFENCE_INVALID_ATTEMPT_MOVE');
  const to = validateEnum(input.to, 'to', ['starting', 'running'] as const, 'ERR_PIDFENCE_INVALID_ATTEMPT_MOVE');
  if (!ATTEMPT_MOVES[from].includes(to)) {
    throw new PidfenceRangeError(
      `an attempt cannot move from ${from} to ${to}; moves go claimed → starting → running.`,
      'ERR_PIDFENCE_INVALID_ATTEMPT_MOVE',
    );
  }
  const command = {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    from,
    to,
  };
  if (input.pid === undefined && input.handle === undefined) return command;
  if (input.pid === undefined || input.handle === undefined) {
    throw new PidfenceTypeError(
      'pass pid and handle together: the handle proves which process the pid was.',
      'ERR_PIDFENCE_INVALID_HANDLE',
    );
  }
  return {
    ...command,
    pid: validateBoundedInteger(input.pid, 'pid', 1, ATTEMPT_PID_MAX, 'ERR_PIDFENCE_INVALID_PID'),
    handle: validateHandle(input.handle),
  };
}

export function validateEndAttemptCommand(value: unknown): EndAttemptCommand {
  const input = validateExactShape(value, 'end-attempt command', ['runId', 'attemptId', 'status']);
  return {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    status: validateEnum(input.status, 'status', RUN_TERMINAL_STATUSES, 'ERR_PIDFENCE_INVALID_RUN_STATUS'),
  };
}

export function validateRequestCancellationCommand(value: unknown): RequestCancellationCommand {
  const input = validateExactShape(value, 'request-cancellation command', ['runId', 'reason', 'eventId']);
  return {
    runId: validateId(input.runId, 'runId'),
    reason: validateEnum(input.reason, 'reason', CANCEL_REASONS, 'ERR_PIDFENCE_INVALID_CANCEL_REASON'),
    eventId: validateId(input.eventId, 'eventId'),
  };
}

/**
 * A page of cancel intents written in one transaction (docs/decisions/0370): 1 to DUE_PAGE_MAX
 * commands, each valid on its own, each run named once.
 */
export function validateRequestCancellationsCommand(value: unknown): RequestCancellationCommand[] {
  return validateRunPage(
    value,
    { page: 'cancel intent', command: 'request-cancellation command', per: 'one per run to stop' },
    DUE_PAGE_MAX,
    validateRequestCancellationCommand,
  );
}

export function validateProjectCancellationCommand(value: unknown): ProjectCancellationCommand {
  const input = validateExactShape(value, 'project-cancellation command', ['projectId', 'reason']);
  return {
    projectId: validateId(input.projectId, 'projectId'),
    reason: validateEnum(input.reason, 'reason', CANCEL_REASONS, 'ERR_PIDFENCE_INVALID_CANCEL_REASON'),
  };
}

export function validateMarkTerminalCommand(value: unknown): MarkTerminalCommand {
  const input = validateExactShape(value, 'mark-terminal command', ['runId', 'status', 'eventId'], ['attemptId']);
  const command = {
    runId: validateId(input.runId, 'runId'),
    status: validateEnum(input.status, 'status', RUN_TERMINAL_STATUSES, 'ERR_PIDFENCE_INVALID_RUN_STATUS'),
    eventId: validateId(input.eventId, 'eventId'),
  };
  return input.attemptId === undefined ? command : { ...command, attemptId: validateId(input.attemptId, 'attemptId') };
}

/** Every attempt status, active first. */
export const ATTEMPT_STATUSES: readonly AttemptStatus[] = [...ATTEMPT_ACTIVE_STATUSES, ...RUN_TERMINAL_STATUSES];
const nullableEpoch = nullableField(validateEpochMs);

/** A run row read from a store, checked like the schema's CHECK constraints check it (corruption fails closed). */
export const validateRunRecord: (value: unknown) => RunRecord = storedRecordValidator<RunRecord>(
  'run record',
  {
    runId: validateId,
    projectId: validateId,
    owner: enumField(RUN_OWNERS),
    status: enumField(RUN_STATUSES),
    version: validateCounter,
    cancelRequestedAtMs: nullableEpoch,
    cancelReason: nullableField(enumField(CANCEL_REASONS)),
    nextEventSeq: validateCounter,
    createdAtMs: validateEpochMs,
    updatedAtMs: validateEpochMs,
  },
  (run, invariant) => {
    invariant(
      (run.cancelRequestedAtMs === null) === (run.cancelReason === null),
      'a cancel request has both its time and its reason',
    );
    invariant(run.nextEventSeq >= 1, 'event sequences start at 1');
  },
);

/** An attempt row read from a store; the handle is opaque here (lib/process parses it), only its type is checked. */
export const validateAttemptRecord: (value: unknown) => AttemptRecord = storedRecordValidator<AttemptRecord>(
  'attempt record',
  {
    attemptId: validateId,
    runId: validateId,
    status: enumField(ATTEMPT_STATUSES),
    pid: nullableField((value, field) =>
      validateBoundedInteger(value, field, 1, ATTEMPT_PID_MAX, 'ERR_PIDFENCE_INVALID_RECORD'),
    ),
    handle: nullableField(storedHandle),
    deadlineAtMs: nullableEpoch,
    receiptTokenDigest: nullableField(validateDigest),
    createdAtMs: validateEpochMs,
    updatedAtMs: validateEpochMs,
  },
  (attempt, invariant) => {
    invariant((attempt.pid === null) === (attempt.handle === null), 'a pid is stored together with its handle');
  },
);

/** The column allows longer handles than today's parser (a future handle version): only non-empty text here. */
function storedHandle(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0)
    throw new PidfenceRangeError(`${field} must be non-empty text.`, 'ERR_PIDFENCE_INVALID_RECORD');
  return value;
}

export function validateEventPage(value: unknown = {}): { readonly afterSeq: number; readonly limit: number } {
  const input = validateExactShape(value, 'event page query', [], ['afterSeq', 'limit']);
  return {
    afterSeq:
      input.afterSeq === undefined
        ? 0
        : validateBoundedInteger(input.afterSeq, 'afterSeq', 0, EPOCH_MS_MAX, 'ERR_PIDFENCE_INVALID_CURSOR'),
    limit:
      input.limit === undefined
        ? EVENT_PAGE_MAX
        : validateBoundedInteger(input.limit, 'limit', 1, EVENT_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT'),
  };
}
