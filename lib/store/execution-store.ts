// The execution store interface both stores implement (design/execution §2-5): bounded keyset pages of
// active attempts and due deadlines, the receipt-digest lookup, the terminal CAS that writes the
// attempt and run terminal states with both events in one transaction, and the receipt journal.
import type {
  ActiveAttempt,
  ActiveCursor,
  AttemptEvent,
  CompleteAttemptCommand,
  CompleteAttemptOutcome,
  DeadlineCursor,
  DueDeadline,
  JournalCursor,
  JournalEntry,
  Page,
  QuarantineReason,
} from '../contract/index';

export interface ExecutionStore {
  /**
   * Active attempts in run-id order (one active attempt per run), at most `limit` (≤ 64); with
   * `runnerId`, only the attempts that runner owns (docs/decisions/0070).
   */
  activeAttemptsPage(query: {
    readonly limit: number;
    readonly after?: ActiveCursor;
    readonly runnerId?: string;
  }): Promise<Page<ActiveAttempt, ActiveCursor>>;
  /**
   * Active attempts past their deadline whose run has no cancel intent yet, (dueAtMs, runId,
   * attemptId) order; with `runnerId`, only that runner's.
   */
  dueDeadlinesPage(query: {
    readonly limit: number;
    readonly after?: DeadlineCursor;
    readonly runnerId?: string;
  }): Promise<Page<DueDeadline, DeadlineCursor>>;
  /**
   * Milliseconds from the store's clock until this runner's earliest future deadline without
   * intent or dispatch retry, null when it has none: the lifecycle arms its one timer
   * for it (docs/decisions/0176). One indexed read.
   */
  nextDueInMs(runnerId: string): Promise<number | null>;
  /** The attempt a receipt-token digest belongs to, or null. */
  attemptByReceiptDigest(digest: string): Promise<{ readonly runId: string; readonly attemptId: string } | null>;
  /**
   * design/execution §2: in one transaction, CAS the active attempt to `status` with an `attempt.terminal`
   * event, then the active run with a `run.terminal` event (and the receipt's delete journal row).
   */
  completeAttempt(command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome>;
  /**
   * A page of ends (docs/decisions/0431): for each command exactly what completeAttempt writes or
   * answers, in command order, all in one transaction (on SQLite one synced commit). A failure
   * writes none of the page.
   */
  completeAttempts(commands: readonly CompleteAttemptCommand[]): Promise<CompleteAttemptOutcome[]>;
  /** Saves a quarantine intent before the receipt file moves; idempotent. */
  recordQuarantineIntent(command: {
    readonly runId: string;
    readonly attemptId: string;
    readonly reason: QuarantineReason;
  }): Promise<void>;
  /** Journal the deletion of a late or repeated receipt of a terminal attempt; idempotent. */
  recordReceiptDeletion(command: { readonly runId: string; readonly attemptId: string }): Promise<void>;
  /** Open journal rows, oldest first. */
  openJournalPage(query: {
    readonly limit: number;
    readonly after?: JournalCursor;
  }): Promise<Page<JournalEntry, JournalCursor>>;
  /** The file action of a journal row happened. */
  closeJournalEntry(entry: { readonly attemptId: string; readonly action: 'delete' | 'quarantine' }): Promise<void>;
  listAttemptEvents(runId: string, attemptId: string): Promise<AttemptEvent[]>;
  /**
   * A boot-clock reading (CLOCK_BOOTTIME ms of boot `bootId`) as the store's own time, where the store
   * clock is anchored to the boot clock (SQLite, docs/decisions/0160); null where it is not (an
   * injected clock, PostgreSQL's database clock) or the boot is unknown to the store.
   */
  storeTimeOfBoot?(bootId: string, bootMs: number): number | null;
  /**
   * Now on a store that keeps its own clock (PostgreSQL's transaction_timestamp()): a receipt's
   * boot-clock finish is mapped onto it by its distance from this host's boot clock now, never
   * through this host's wall clock (docs/decisions/0190). Absent where storeTimeOfBoot maps exactly.
   */
  storeNowMs?(): Promise<number>;
}
