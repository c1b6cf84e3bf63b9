// The execution store interface both stores implement (design/execution §2-5): bounded keyset pages of
// active attempts and due deadlines, the receipt-digest lookup, the terminal CAS that writes the
// attempt and run terminal states with both events in one transaction, and the receipt journal.
import type { AttemptActiveStatus, AttemptRecord, CancelReason, CompletionCause, RunRecord, RunTerminalStatus } from '../contract/index';

/** design/execution §3: a source page never holds more than this. */
export const EXECUTION_PAGE_MAX = 64;

export interface ActiveAttempt {
  readonly runId: string;
  readonly attemptId: string;
  readonly status: AttemptActiveStatus;
  readonly hasHandle: boolean;
  readonly cancelRequestedAtMs: number | null;
  readonly cancelReason: CancelReason | null;
}

export interface ActiveCursor {
  readonly runId: string;
}

export interface DueDeadline {
  readonly runId: string;
  readonly attemptId: string;
  readonly dueAtMs: number;
}

export interface DeadlineCursor {
  readonly dueAtMs: number;
  readonly runId: string;
  readonly attemptId: string;
}

export interface Page<T, C> {
  readonly items: readonly T[];
  /** null: the source is exhausted. */
  readonly next: C | null;
}

export { COMPLETION_CAUSES } from '../contract/index';
export type { CompletionCause } from '../contract/index';

export interface AttemptExit {
  readonly exitCode: number | null;
  readonly signal: string | null;
}

export interface CompleteAttemptCommand {
  readonly runId: string;
  readonly attemptId: string;
  readonly status: RunTerminalStatus;
  readonly cause: CompletionCause;
  readonly exit: AttemptExit | null;
  readonly attemptEventId: string;
  readonly runEventId: string;
  /** Journal the receipt for deletion in the same transaction (cause `receipt`). */
  readonly journalReceipt: boolean;
}

export type CompleteAttemptOutcome =
  | { readonly kind: 'completed'; readonly run: RunRecord; readonly attempt: AttemptRecord }
  | { readonly kind: 'already_terminal'; readonly attempt: AttemptRecord }
  | { readonly kind: 'missing' };

export type QuarantineReason = 'malformed' | 'identity' | 'token' | 'sequence' | 'time';
export const QUARANTINE_REASONS: readonly QuarantineReason[] = ['malformed', 'identity', 'token', 'sequence', 'time'];

export interface JournalEntry {
  readonly runId: string;
  readonly attemptId: string;
  readonly action: 'delete' | 'quarantine';
  readonly createdAtMs: number;
}

export interface JournalCursor {
  readonly createdAtMs: number;
  readonly attemptId: string;
  readonly action: 'delete' | 'quarantine';
}

export interface AttemptEvent {
  readonly id: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly seq: number;
  readonly type: 'attempt.terminal' | 'attempt.adopted';
  readonly payload: unknown;
  readonly createdAtMs: number;
}

export interface ExecutionStore {
  /**
   * Active attempts in run-id order (one active attempt per run), at most `limit` (≤ 64); with
   * `runnerId`, only the attempts that runner owns (docs/decisions/0070).
   */
  activeAttemptsPage(query: { readonly limit: number; readonly after?: ActiveCursor; readonly runnerId?: string }): Promise<Page<ActiveAttempt, ActiveCursor>>;
  /**
   * Active attempts past their deadline whose run has no cancel intent yet, (dueAtMs, runId,
   * attemptId) order; with `runnerId`, only that runner's.
   */
  dueDeadlinesPage(query: { readonly limit: number; readonly after?: DeadlineCursor; readonly runnerId?: string }): Promise<Page<DueDeadline, DeadlineCursor>>;
  /** The attempt a receipt-token digest belongs to, or null. */
  attemptByReceiptDigest(digest: string): Promise<{ readonly runId: string; readonly attemptId: string } | null>;
  /**
   * design/execution §2: in one transaction, CAS the active attempt to `status` with an `attempt.terminal`
   * event, then the active run with a `run.terminal` event (and the receipt's delete journal row).
   */
  completeAttempt(command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome>;
  /** Saves a quarantine intent before the receipt file moves; idempotent. */
  recordQuarantineIntent(command: { readonly runId: string; readonly attemptId: string; readonly reason: QuarantineReason }): Promise<void>;
  /** Journal the deletion of a late or repeated receipt of a terminal attempt; idempotent. */
  recordReceiptDeletion(command: { readonly runId: string; readonly attemptId: string }): Promise<void>;
  /** Open journal rows, oldest first. */
  openJournalPage(query: { readonly limit: number; readonly after?: JournalCursor }): Promise<Page<JournalEntry, JournalCursor>>;
  /** The file action of a journal row happened. */
  closeJournalEntry(entry: { readonly attemptId: string; readonly action: 'delete' | 'quarantine' }): Promise<void>;
  listAttemptEvents(runId: string, attemptId: string): Promise<AttemptEvent[]>;
}
