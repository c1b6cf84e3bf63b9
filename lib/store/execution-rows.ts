// What the SQLite and PostgreSQL execution stores share besides SQL text (design/execution §2-3): the page
// and row mappers, the attempt event payload and the terminal-CAS decision. The SQL text is in
// execution-statements.ts (docs/decisions/0410).
import {
  type ActiveAttempt,
  type ActiveCursor,
  type AttemptEvent,
  type AttemptRecord,
  type CompleteAttemptCommand,
  type CompleteAttemptOutcome,
  type DeadlineCursor,
  type DueDeadline,
  type JournalCursor,
  type JournalEntry,
  neverStartedStatus,
  type Page,
  runIsActive,
  type RunRecord,
  validateActiveAttempt,
  validateAttemptEvent,
  validateDueDeadline,
  validateJournalEntry,
} from '../contract/index';
import { isPlainObject } from '../base/shape';

/** The row of nextDueInMsSql (execution-statements.ts) as a delay: null when nothing is due, else at least 0. */
export function dueDelayOf(row: unknown): number | null {
  const value = (row as { dueInMs?: unknown } | undefined)?.dueInMs;
  if (value === null || value === undefined) return null;
  const ms = Number(value);
  if (!Number.isFinite(ms)) throw new TypeError('nextDueInMs: the store answered a delay that is not a number');
  return Math.max(0, ms);
}

/** Keyset positions before every real key (times are >= 0, ids and actions are non-empty). */
export function deadlineKeyset(after: DeadlineCursor | null): {
  afterDueAtMs: number;
  afterRunId: string;
  afterAttemptId: string;
} {
  return { afterDueAtMs: after?.dueAtMs ?? -1, afterRunId: after?.runId ?? '', afterAttemptId: after?.attemptId ?? '' };
}

export function journalKeyset(after: JournalCursor | null): {
  afterAtMs: number;
  afterAttemptId: string;
  afterAction: string;
} {
  return {
    afterAtMs: after?.createdAtMs ?? -1,
    afterAttemptId: after?.attemptId ?? '',
    afterAction: after?.action ?? '',
  };
}

export function pageOf<T, C>(items: T[], limit: number, cursor: (last: T) => C): Page<T, C> {
  const last = items[items.length - 1];
  return { items, next: items.length === limit && last !== undefined ? cursor(last) : null };
}

/** A page of active attempts from the rows a store read (each through its validator). */
export function activePageOf(rows: readonly unknown[], limit: number): Page<ActiveAttempt, ActiveCursor> {
  return pageOf(rows.map(validateActiveAttempt), limit, (last) => ({ runId: last.runId }));
}

export function deadlinePageOf(rows: readonly unknown[], limit: number): Page<DueDeadline, DeadlineCursor> {
  return pageOf(rows.map(validateDueDeadline), limit, (last) => ({
    dueAtMs: last.dueAtMs,
    runId: last.runId,
    attemptId: last.attemptId,
  }));
}

export function journalPageOf(rows: readonly unknown[], limit: number): Page<JournalEntry, JournalCursor> {
  return pageOf(rows.map(validateJournalEntry), limit, (last) => ({
    createdAtMs: last.createdAtMs,
    attemptId: last.attemptId,
    action: last.action,
  }));
}

/** SQLite stores the payload as text; PostgreSQL's json column arrives parsed. */
export function attemptEventsOf(rows: readonly unknown[]): AttemptEvent[] {
  return rows.map((row) => validateAttemptEvent(withDecodedPayload(row)));
}

/** A row whose `payload` column is JSON text, with the text decoded (a row without one is left for its validator). */
export function withDecodedPayload(row: unknown): unknown {
  return isPlainObject(row) && typeof row.payload === 'string'
    ? { ...row, payload: JSON.parse(row.payload) as unknown }
    : row;
}

/** The `attempt.terminal` payload (low-sensitivity: status, cause, exit code, signal name). */
export function attemptTerminalPayload(command: CompleteAttemptCommand): string {
  return JSON.stringify({
    status: command.status,
    cause: command.cause,
    exitCode: command.exit?.exitCode ?? null,
    signal: command.exit?.signal ?? null,
  });
}

export function runTerminalPayload(command: CompleteAttemptCommand): {
  status: CompleteAttemptCommand['status'];
  attemptId: string;
} {
  return { status: command.status, attemptId: command.attemptId };
}

/**
 * The terminal CAS decision for the rows a store read (under its locks): an outcome that ends the
 * transaction without a write, or null to go on with the attempt CAS.
 */
export function completionRefusal(
  attempt: AttemptRecord | undefined,
  run: RunRecord | undefined,
): CompleteAttemptOutcome | null {
  if (attempt === undefined || run === undefined) return { kind: 'missing' };
  if (!runIsActive(run.status)) return { kind: 'already_terminal', attempt };
  return null;
}

/**
 * The end the CAS writes for the run it locked (docs/decisions/0440): a never-started end sent as
 * `failed` takes the run's cancel intent, read here under the lock, so no intent stored before the
 * end is lost to a caller that read the run earlier (the completion processor) or not at all (the
 * cluster's settle of an earlier session, a worker's own never_started report).
 */
export function endUnderIntent(command: CompleteAttemptCommand, run: RunRecord): CompleteAttemptCommand {
  if (command.cause !== 'never_started' || command.status !== 'failed') return command;
  const status = neverStartedStatus(run);
  return status === command.status ? command : { ...command, status };
}
