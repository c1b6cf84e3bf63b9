// SqliteExecutionStore (design/execution §2-3): keyset pages of active attempts and due deadlines on the
// existing partial indexes, the terminal CAS with attempt and run events in one BEGIN IMMEDIATE
// transaction, and the receipt journal.
import {
  type ActiveAttempt,
  type ActiveCursor,
  type AttemptEvent,
  type CompleteAttemptCommand,
  type CompleteAttemptOutcome,
  type DeadlineCursor,
  type DueDeadline,
  type JournalCursor,
  type JournalEntry,
  type Page,
  type QuarantineReason,
  validateActivePageQuery,
  validateAttemptRecord,
  validateAttemptRef,
  validateCompleteAttemptCommand,
  validateCompleteAttemptsCommand,
  validateDeadlinePageQuery,
  validateDigest,
  validateId,
  validateJournalEntryRef,
  validateJournalPageQuery,
  validateQuarantineIntent,
  validateStoredAttemptRef,
} from '../../contract/index';
import type { ExecutionStore } from '../execution-store';
import {
  activePageOf,
  attemptEventsOf,
  attemptTerminalPayload,
  completionRefusal,
  deadlineKeyset,
  deadlinePageOf,
  dueDelayOf,
  endUnderIntent,
  journalKeyset,
  journalPageOf,
  runTerminalPayload,
} from '../execution-rows';
import { storeInvariant } from '../store-errors';
import { boundaryOf, type SqliteBoundary } from './transaction';
import { storeClockOf, type BootAnchoredClock, type Clock } from './clock';
import type { SqliteDatabase } from './database';
import { EXECUTION_SQL, type ExecutionStatements } from './execution-statements';
import { appendRunEvent } from './run-events';
import { counterColumn, selectAttempt, selectHeldRun, selectRun, validatedRow } from './rows';
import type { PreparedStatements } from './prepared';

export class SqliteExecutionStore implements ExecutionStore {
  readonly #boundary: SqliteBoundary;
  readonly #run: PreparedStatements;
  readonly #sql: ExecutionStatements;
  /** The boot-anchored clock when it is this store's clock (no clock injected). */
  readonly #anchored: BootAnchoredClock | null;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock } = {}) {
    this.#boundary = boundaryOf(database, options.clock);
    this.#anchored = options.clock === undefined ? storeClockOf(database) : null;
    this.#run = this.#boundary.statements;
    this.#sql = this.#boundary.sql(EXECUTION_SQL);
  }

  #write<T>(operation: string, work: (nowMs: number) => T): T {
    return this.#boundary.write(operation, work);
  }

  #read<T>(operation: string, work: () => T): T {
    return this.#boundary.read(operation, work);
  }

  storeTimeOfBoot(bootId: string, bootMs: number): number | null {
    const anchored = this.#anchored;
    return anchored === null ? null : this.#read('storeTimeOfBoot', () => anchored.storeTimeOf(bootId, bootMs));
  }

  async activeAttemptsPage(query: {
    readonly limit: number;
    readonly after?: ActiveCursor;
    readonly runnerId?: string;
  }): Promise<Page<ActiveAttempt, ActiveCursor>> {
    const { limit, after, runnerId } = validateActivePageQuery(query);
    const params = { afterRunId: after?.runId ?? '', limit };
    return this.#read('activeAttemptsPage', () =>
      activePageOf(
        runnerId === null
          ? this.#sql.activeAttemptsPage.all(params)
          : this.#sql.ownedAttemptsPage.all({ ...params, runnerId }),
        limit,
      ),
    );
  }

  async dueDeadlinesPage(query: {
    readonly limit: number;
    readonly after?: DeadlineCursor;
    readonly runnerId?: string;
  }): Promise<Page<DueDeadline, DeadlineCursor>> {
    const { limit, after, runnerId } = validateDeadlinePageQuery(query);
    return this.#read('dueDeadlinesPage', () => {
      const params = { nowMs: this.#boundary.now(), ...deadlineKeyset(after), limit };
      return deadlinePageOf(
        runnerId === null
          ? this.#sql.dueDeadlinesPage.all(params)
          : this.#sql.ownedDueDeadlinesPage.all({ ...params, runnerId }),
        limit,
      );
    });
  }

  async nextDueInMs(runnerId: string): Promise<number | null> {
    const valid = validateId(runnerId, 'runnerId');
    return this.#read('nextDueInMs', () =>
      dueDelayOf(this.#sql.nextDueInMs.get({ nowMs: this.#boundary.now(), runnerId: valid })),
    );
  }

  async attemptByReceiptDigest(digest: string): Promise<{ readonly runId: string; readonly attemptId: string } | null> {
    const valid = validateDigest(digest, 'receipt token digest');
    return (
      this.#read('attemptByReceiptDigest', () =>
        validatedRow(this.#sql.attemptByReceiptDigest.get(valid), validateStoredAttemptRef),
      ) ?? null
    );
  }

  async completeAttempt(command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome> {
    const valid = validateCompleteAttemptCommand(command);
    return this.#write('completeAttempt', (nowMs) => this.#completeLocked(valid, nowMs));
  }

  /** One synced transaction for the page (docs/decisions/0431): each end is the single CAS, in order. */
  async completeAttempts(commands: readonly CompleteAttemptCommand[]): Promise<CompleteAttemptOutcome[]> {
    const valid = validateCompleteAttemptsCommand(commands);
    return this.#write('completeAttempts', (nowMs) => valid.map((command) => this.#completeLocked(command, nowMs)));
  }

  /** The terminal CAS inside the write transaction: attempt and its event, then the run and its event. */
  #completeLocked(command: CompleteAttemptCommand, nowMs: number): CompleteAttemptOutcome {
    const attempt = selectAttempt(this.#run, command.runId, command.attemptId);
    const run = selectRun(this.#run, command.runId);
    const refusal = completionRefusal(attempt, run);
    if (refusal !== null || attempt === undefined || run === undefined) return refusal ?? { kind: 'missing' };
    const valid = endUnderIntent(command, run);
    const ended = validatedRow(
      this.#run.endAttempt.get({ runId: valid.runId, attemptId: valid.attemptId, status: valid.status, nowMs }),
      validateAttemptRecord,
    );
    if (ended === undefined) return { kind: 'already_terminal', attempt };
    // Attempt event first, then the run's terminal state and event (design/execution §2 order).
    const seq = counterColumn(this.#sql.nextAttemptEventSeq.get(valid.attemptId), 'seq');
    if (seq === undefined)
      throw storeInvariant('sqlite', 'completeAttempt', 'the next attempt event sequence has no row');
    this.#sql.insertAttemptEvent.run({
      runId: valid.runId,
      attemptId: valid.attemptId,
      seq,
      eventId: valid.attemptEventId,
      payload: attemptTerminalPayload(valid),
      nowMs,
    });
    this.#run.writeRunTerminal.run({ runId: valid.runId, version: run.version, status: valid.status, nowMs });
    appendRunEvent(this.#run, {
      runId: valid.runId,
      version: run.version,
      type: 'run.terminal',
      eventId: valid.runEventId,
      payload: runTerminalPayload(valid),
      nowMs,
    });
    if (valid.journalReceipt)
      this.#sql.insertJournal.run({
        attemptId: valid.attemptId,
        action: 'delete',
        runId: valid.runId,
        reason: null,
        nowMs,
      });
    return { kind: 'completed', run: selectHeldRun(this.#run, valid.runId, 'completeAttempt'), attempt: ended };
  }

  async recordQuarantineIntent(command: {
    readonly runId: string;
    readonly attemptId: string;
    readonly reason: QuarantineReason;
  }): Promise<void> {
    const { runId, attemptId, reason } = validateQuarantineIntent(command);
    this.#write('recordQuarantineIntent', (nowMs) =>
      this.#sql.insertJournal.run({ attemptId, action: 'quarantine', runId, reason, nowMs }),
    );
  }

  async recordReceiptDeletion(command: { readonly runId: string; readonly attemptId: string }): Promise<void> {
    const { runId, attemptId } = validateAttemptRef(command);
    this.#write('recordReceiptDeletion', (nowMs) =>
      this.#sql.insertJournal.run({ attemptId, action: 'delete', runId, reason: null, nowMs }),
    );
  }

  async openJournalPage(query: {
    readonly limit: number;
    readonly after?: JournalCursor;
  }): Promise<Page<JournalEntry, JournalCursor>> {
    const { limit, after } = validateJournalPageQuery(query);
    return this.#read('openJournalPage', () =>
      journalPageOf(this.#sql.openJournalPage.all({ ...journalKeyset(after), limit }), limit),
    );
  }

  async closeJournalEntry(entry: {
    readonly attemptId: string;
    readonly action: 'delete' | 'quarantine';
  }): Promise<void> {
    const { attemptId, action } = validateJournalEntryRef(entry);
    this.#write('closeJournalEntry', (nowMs) => this.#sql.closeJournal.run({ attemptId, action, nowMs }));
  }

  async listAttemptEvents(runId: string, attemptId: string): Promise<AttemptEvent[]> {
    const ids = [validateId(runId, 'runId'), validateId(attemptId, 'attemptId')] as const;
    return this.#read('listAttemptEvents', () => attemptEventsOf(this.#sql.listAttemptEvents.all(...ids)));
  }
}
