// The execution contract (design/execution §2-5): what the local lifecycle and its stores exchange —
// keyset pages of active attempts and due deadlines, the terminal-CAS command and its outcome, the
// receipt journal and attempt events. Types and limits only; the validators are execution-validators.ts.
import type { CancelReason } from './events';
import type { AttemptActiveStatus, AttemptRecord, RunRecord, RunTerminalStatus } from './run';

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

/** How the attempt ended, as far as pidfence can prove it (low-sensitivity: no PID, command, token). */
export type CompletionCause =
  /** An authenticated completion receipt. */
  | 'receipt'
  /** Cancelled before any process existed (a `claimed` attempt). */
  | 'never_started'
  /** The exact process group was proved gone after a stop, and no receipt exists. */
  | 'stopped'
  /** The exact process group was proved gone without a stop or a receipt (the launcher died). */
  | 'lost'
  /**
   * Cluster only (docs/decisions/0271): nobody proved the end; an operator declared the worker's host
   * gone (`pidfence worker forget`). The record says so, and a later report of the worker is refused.
   */
  | 'forgotten';

export const COMPLETION_CAUSES: readonly CompletionCause[] = [
  'receipt',
  'never_started',
  'stopped',
  'lost',
  'forgotten',
];

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
