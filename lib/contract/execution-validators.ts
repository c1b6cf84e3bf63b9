// Validators of the execution contract's queries and commands (design/execution §2-3), used by both stores:
// exact shapes, page limits ≤ 64, the terminal status and cause enums.
import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { SIGNAL_NAME_PATTERN } from '../base/limits';
import { EPOCH_MS_MAX } from './limits';
import { CANCEL_REASONS } from './events';
import { ATTEMPT_ACTIVE_STATUSES, RUN_TERMINAL_STATUSES } from './run';
import {
  enumField,
  nullableField,
  storedRecordValidator,
  validateBoundedInteger,
  validateCounter,
  validateEnum,
  validateEpochMs,
  validateExactShape,
  validateId,
  validateRunPage,
} from './validators';
import {
  EXECUTION_PAGE_MAX,
  COMPLETION_CAUSES,
  QUARANTINE_REASONS,
  type ActiveAttempt,
  type ActiveCursor,
  type AttemptEvent,
  type CompleteAttemptCommand,
  type DeadlineCursor,
  type DueDeadline,
  type JournalCursor,
  type JournalEntry,
  type QuarantineReason,
} from './execution';

const JOURNAL_ACTIONS = ['delete', 'quarantine'] as const;

export function validatePageLimit(value: unknown): number {
  return validateBoundedInteger(value, 'limit', 1, EXECUTION_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
}

function epoch(value: unknown, what: string): number {
  return validateBoundedInteger(value, what, 0, EPOCH_MS_MAX, 'ERR_PIDFENCE_INVALID_CURSOR');
}

function optionalRunnerId(value: unknown): string | null {
  return value === undefined ? null : validateId(value, 'runnerId');
}

export function validateActivePageQuery(value: unknown): {
  limit: number;
  after: ActiveCursor | null;
  runnerId: string | null;
} {
  const input = validateExactShape(value, 'active attempts page query', ['limit'], ['after', 'runnerId']);
  const runnerId = optionalRunnerId(input.runnerId);
  if (input.after === undefined) return { limit: validatePageLimit(input.limit), after: null, runnerId };
  const after = validateExactShape(input.after, 'active attempts cursor', ['runId']);
  return { limit: validatePageLimit(input.limit), after: { runId: validateId(after.runId, 'cursor runId') }, runnerId };
}

export function validateDeadlinePageQuery(value: unknown): {
  limit: number;
  after: DeadlineCursor | null;
  runnerId: string | null;
} {
  const input = validateExactShape(value, 'due deadlines page query', ['limit'], ['after', 'runnerId']);
  const runnerId = optionalRunnerId(input.runnerId);
  if (input.after === undefined) return { limit: validatePageLimit(input.limit), after: null, runnerId };
  const after = validateExactShape(input.after, 'due deadlines cursor', ['dueAtMs', 'runId', 'attemptId']);
  return {
    limit: validatePageLimit(input.limit),
    after: {
      dueAtMs: epoch(after.dueAtMs, 'cursor dueAtMs'),
      runId: validateId(after.runId, 'cursor runId'),
      attemptId: validateId(after.attemptId, 'cursor attemptId'),
    },
    runnerId,
  };
}

export function validateJournalPageQuery(value: unknown): { limit: number; after: JournalCursor | null } {
  const input = validateExactShape(value, 'journal page query', ['limit'], ['after']);
  if (input.after === undefined) return { limit: validatePageLimit(input.limit), after: null };
  const after = validateExactShape(input.after, 'journal cursor', ['createdAtMs', 'attemptId', 'action']);
  return {
    limit: validatePageLimit(input.limit),
    after: {
      createdAtMs: epoch(after.createdAtMs, 'cursor createdAtMs'),
      attemptId: validateId(after.attemptId, 'cursor attemptId'),
      action: validateEnum(after.action, 'cursor action', JOURNAL_ACTIONS, 'ERR_PIDFENCE_INVALID_CURSOR'),
    },
  };
}

export function validateJournalAction(value: unknown): 'delete' | 'quarantine' {
  return validateEnum(value, 'action', JOURNAL_ACTIONS, 'ERR_PIDFENCE_INVALID_COMMAND');
}

export function validateQuarantineReason(value: unknown): QuarantineReason {
  return validateEnum(value, 'reason', QUARANTINE_REASONS, 'ERR_PIDFENCE_INVALID_COMMAND');
}

/** The attempt a journal write names (a receipt deletion intent). */
export function validateAttemptRef(command: { readonly runId: unknown; readonly attemptId: unknown }): {
  runId: string;
  attemptId: string;
} {
  return { runId: validateId(command.runId, 'runId'), attemptId: validateId(command.attemptId, 'attemptId') };
}

export function validateQuarantineIntent(command: {
  readonly runId: unknown;
  readonly attemptId: unknown;
  readonly reason: unknown;
}): { runId: string; attemptId: string; reason: QuarantineReason } {
  return { ...validateAttemptRef(command), reason: validateQuarantineReason(command.reason) };
}

/** The journal row a file action closes. */
export function validateJournalEntryRef(entry: { readonly attemptId: unknown; readonly action: unknown }): {
  attemptId: string;
  action: 'delete' | 'quarantine';
} {
  return { attemptId: validateId(entry.attemptId, 'attemptId'), action: validateJournalAction(entry.action) };
}

export function validateCompleteAttemptCommand(value: unknown): CompleteAttemptCommand {
  const input = validateExactShape(value, 'complete-attempt command', [
    'runId',
    'attemptId',
    'status',
    'cause',
    'exit',
    'attemptEventId',
    'runEventId',
    'journalReceipt',
  ]);
  let exit: CompleteAttemptCommand['exit'] = null;
  if (input.exit !== null) {
    const raw = validateExactShape(input.exit, 'exit', ['exitCode', 'signal']);
    const exitCode =
      raw.exitCode === null
        ? null
        : validateBoundedInteger(raw.exitCode, 'exitCode', 0, 255, 'ERR_PIDFENCE_INVALID_COMMAND');
    if (raw.signal !== null && (typeof raw.signal !== 'string' || !SIGNAL_NAME_PATTERN.test(raw.signal))) {
      throw new PidfenceRangeError(
        'exit signal must be null or a signal name such as "SIGTERM".',
        'ERR_PIDFENCE_INVALID_COMMAND',
      );
    }
    const signal = raw.signal as string | null;
    exit = { exitCode, signal };
  }
  if (typeof input.journalReceipt !== 'boolean')
    throw new PidfenceTypeError('journalReceipt must be a boolean.', 'ERR_PIDFENCE_INVALID_COMMAND');
  return {
    runId: validateId(input.runId, 'runId'),
    attemptId: validateId(input.attemptId, 'attemptId'),
    status: validateEnum(input.status, 'status', RUN_TERMINAL_STATUSES, 'ERR_PIDFENCE_INVALID_RUN_STATUS'),
    cause: validateEnum(input.cause, 'cause', COMPLETION_CAUSES, 'ERR_PIDFENCE_INVALID_COMMAND'),
    exit,
    attemptEventId: validateId(input.attemptEventId, 'attemptEventId'),
    runEventId: validateId(input.runEventId, 'runEventId'),
    journalReceipt: input.journalReceipt as boolean,
  };
}

/**
 * A page of ends committed in one transaction (docs/decisions/0431): 1 to EXECUTION_PAGE_MAX commands,
 * each valid alone, each attempt and each run named once.
 */
export function validateCompleteAttemptsCommand(value: unknown): CompleteAttemptCommand[] {
  return validateRunPage(
    value,
    { page: 'attempt end', command: 'complete-attempt command', per: 'one per attempt that ended' },
    EXECUTION_PAGE_MAX,
    validateCompleteAttemptCommand,
  );
}

// ---- rows read back from a store (design/execution §2-3): through validators, never type assertions ----

const noRules = (): void => undefined;

/** SQLite answers `handle IS NOT NULL` with 0/1, PostgreSQL with a boolean. */
function storedBoolean(value: unknown, field: string): boolean {
  if (value === true || value === 1) return true;
  if (value === false || value === 0) return false;
  throw new PidfenceTypeError(`${field} must be a boolean.`, 'ERR_PIDFENCE_INVALID_RECORD');
}

export const validateActiveAttempt: (value: unknown) => ActiveAttempt = storedRecordValidator<ActiveAttempt>(
  'active attempt',
  {
    runId: validateId,
    attemptId: validateId,
    status: enumField(ATTEMPT_ACTIVE_STATUSES),
    hasHandle: storedBoolean,
    cancelRequestedAtMs: nullableField(validateEpochMs),
    cancelReason: nullableField(enumField(CANCEL_REASONS)),
  },
  noRules,
);

export const validateDueDeadline: (value: unknown) => DueDeadline = storedRecordValidator<DueDeadline>(
  'due deadline',
  {
    runId: validateId,
    attemptId: validateId,
    dueAtMs: validateEpochMs,
  },
  noRules,
);

export const validateJournalEntry: (value: unknown) => JournalEntry = storedRecordValidator<JournalEntry>(
  'receipt journal entry',
  {
    runId: validateId,
    attemptId: validateId,
    action: enumField(JOURNAL_ACTIONS),
    createdAtMs: validateEpochMs,
  },
  noRules,
);

/** The attempt a receipt digest belongs to. */
export const validateStoredAttemptRef: (value: unknown) => { readonly runId: string; readonly attemptId: string } =
  storedRecordValidator<{ readonly runId: string; readonly attemptId: string }>(
    'attempt reference',
    { runId: validateId, attemptId: validateId },
    noRules,
  );

/** An attempt event, its payload already decoded from JSON. */
export const validateAttemptEvent: (value: unknown) => AttemptEvent = storedRecordValidator<AttemptEvent>(
  'attempt event',
  {
    id: validateId,
    runId: validateId,
    attemptId: validateId,
    seq: validateCounter,
    type: enumField(['attempt.terminal', 'attempt.adopted'] as const),
    payload: (value) => value,
    createdAtMs: validateEpochMs,
  },
  (event, invariant) => invariant(event.seq >= 1, 'event sequences start at 1'),
);
