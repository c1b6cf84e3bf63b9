// PostgresExecutionStore (design/execution §2-3): keyset pages of active attempts and due deadlines on the
// partial indexes, the terminal CAS with attempt and run events in one transaction (locks Run →
// Attempt), and the receipt journal; transaction_timestamp() is the only clock (design/postgres §D3).
import type { Pool } from 'pg';

import {
  type ActiveAttempt,
  type ActiveCursor,
  type AttemptEvent,
  validateAttemptRecord,
  validateCounter,
  validateEpochMs,
  validateStoredAttemptRef,
  type CompleteAttemptCommand,
  type CompleteAttemptOutcome,
  type DeadlineCursor,
  type DueDeadline,
  type JournalCursor,
  type JournalEntry,
  type Page,
  type QuarantineReason,
  validateActivePageQuery,
  validateAttemptRef,
  validateCompleteAttemptCommand,
  validateCompleteAttemptsCommand,
  validateDeadlinePageQuery,
  validateDigest,
  validateId,
  validateJournalEntryRef,
  validateJournalPageQuery,
  validateQuarantineIntent,
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
import { EXECUTION_SQL } from './execution-statements';
import { appendRunEvent, lockRun } from './run-events';
import { CLOCK_SQL } from './clock-statements';
import { RUN_SQL } from './run-statements';
import { inTransaction, readInOneStatement, type Tx } from './transaction';

export class PostgresExecutionStore implements ExecutionStore {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** The database clock now (design/postgres §D3), one round trip. */
  async storeNowMs(): Promise<number> {
    const [row] = await readInOneStatement<{ nowMs: number }>(this.#pool, 'storeNowMs', {
      name: 'pidfence_store_now',
      text: CLOCK_SQL.now,
      values: [],
    });
    return validateEpochMs(row?.nowMs, 'nowMs');
  }

  async activeAttemptsPage(query: {
    readonly limit: number;
    readonly after?: ActiveCursor;
    readonly runnerId?: string;
  }): Promise<Page<ActiveAttempt, ActiveCursor>> {
    const { limit, after, runnerId } = validateActivePageQuery(query);
    const [sql, params] =
      runnerId === null
        ? [EXECUTION_SQL.activeAttemptsPage, [after?.runId ?? '', limit]]
        : [EXECUTION_SQL.ownedAttemptsPage, [after?.runId ?? '', limit, runnerId]];
    const rows = await inTransaction(this.#pool, 'activeAttemptsPage', (tx) => tx.rows(sql, params));
    return activePageOf(rows, limit);
  }

  async dueDeadlinesPage(query: {
    readonly limit: number;
    readonly after?: DeadlineCursor;
    readonly runnerId?: string;
  }): Promise<Page<DueDeadline, DeadlineCursor>> {
    const { limit, after, runnerId } = validateDeadlinePageQuery(query);
    const keyset = deadlineKeyset(after);
    const params: unknown[] = [keyset.afterDueAtMs, keyset.afterRunId, keyset.afterAttemptId, limit];
    const sql = runnerId === null ? EXECUTION_SQL.dueDeadlinesPage : EXECUTION_SQL.ownedDueDeadlinesPage;
    const rows = await inTransaction(this.#pool, 'dueDeadlinesPage', (tx) =>
      tx.rows(sql, runnerId === null ? params : [...params, runnerId]),
    );
    return deadlinePageOf(rows, limit);
  }

  async nextDueInMs(runnerId: string): Promise<number | null> {
    const valid = validateId(runnerId, 'runnerId');
    const [row] = await inTransaction(this.#pool, 'nextDueInMs', (tx) => tx.rows(EXECUTION_SQL.nextDueInMs, [valid]));
    return dueDelayOf(row);
  }

  async attemptByReceiptDigest(digest: string): Promise<{ readonly runId: string; readonly attemptId: string } | null> {
    const valid = validateDigest(digest, 'receipt token digest');
    const [row] = await inTransaction(this.#pool, 'attemptByReceiptDigest', (tx) =>
      tx.rows(EXECUTION_SQL.attemptByReceiptDigest, [valid]),
    );
    return row === undefined ? null : validateStoredAttemptRef(row);
  }

  async completeAttempt(command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome> {
    const valid = validateCompleteAttemptCommand(command);
    return inTransaction(this.#pool, 'completeAttempt', (tx) => this.#completeLocked(tx, valid));
  }

  /**
   * The page's ends in one transaction (docs/decisions/0431), each the single CAS, in command order.
   * The page's runs are locked first, in the database's id order (as a completion page's release
   * and every other several-run lock take them), so two pages never wait on each other in a cycle.
   */
  async completeAttempts(commands: readonly CompleteAttemptCommand[]): Promise<CompleteAttemptOutcome[]> {
    const valid = validateCompleteAttemptsCommand(commands);
    return inTransaction(this.#pool, 'completeAttempts', async (tx) => {
      await tx.rows(RUN_SQL.lockRunsInOrder, [valid.map((command) => command.runId)]);
      const outcomes: CompleteAttemptOutcome[] = [];
      for (const command of valid) outcomes.push(await this.#completeLocked(tx, command));
      return outcomes;
    });
  }

  /** Locks Run → Attempt (the order of every write transaction), then the CAS and both events at the run lock's time. */
  async #completeLocked(tx: Tx, command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome> {
    const run = await lockRun(tx, command.runId);
    const [attemptRow] =
      run === undefined ? [] : await tx.rows(EXECUTION_SQL.lockAttemptRecord, [command.runId, command.attemptId]);
    const attempt = attemptRow === undefined ? undefined : validateAttemptRecord(attemptRow);
    const refusal = completionRefusal(attempt, run);
    if (refusal !== null || attempt === undefined || run === undefined) return refusal ?? { kind: 'missing' };
    const valid = endUnderIntent(command, run);
    const [ended] = await tx.rows(RUN_SQL.endAttempt, [valid.runId, valid.attemptId, valid.status, run.nowMs]);
    if (ended === undefined) return { kind: 'already_terminal', attempt };
    // Attempt event first, then the run's terminal state and event (design/execution §2 order).
    const [next] = await tx.rows(EXECUTION_SQL.nextAttemptEventSeq, [valid.attemptId]);
    await tx.rows(EXECUTION_SQL.insertAttemptEvent, [
      valid.runId,
      valid.attemptId,
      next === undefined ? 1 : validateCounter(next.seq, 'seq'),
      valid.attemptEventId,
      attemptTerminalPayload(valid),
      run.nowMs,
    ]);
    await tx.rows(RUN_SQL.writeRunTerminal, [valid.runId, run.version, valid.status, run.nowMs]);
    const appended = await appendRunEvent(tx, run, {
      type: 'run.terminal',
      eventId: valid.runEventId,
      payload: runTerminalPayload(valid),
    });
    if (valid.journalReceipt)
      await tx.rows(EXECUTION_SQL.insertJournal, [valid.attemptId, 'delete', valid.runId, null]);
    return { kind: 'completed', run: appended.run, attempt: validateAttemptRecord(ended) };
  }

  async recordQuarantineIntent(command: {
    readonly runId: string;
    readonly attemptId: string;
    readonly reason: QuarantineReason;
  }): Promise<void> {
    const { runId, attemptId, reason } = validateQuarantineIntent(command);
    await inTransaction(this.#pool, 'recordQuarantineIntent', (tx) =>
      tx.rows(EXECUTION_SQL.insertJournal, [attemptId, 'quarantine', runId, reason]),
    );
  }

  async recordReceiptDeletion(command: { readonly runId: string; readonly attemptId: string }): Promise<void> {
    const { runId, attemptId } = validateAttemptRef(command);
    await inTransaction(this.#pool, 'recordReceiptDeletion', (tx) =>
      tx.rows(EXECUTION_SQL.insertJournal, [attemptId, 'delete', runId, null]),
    );
  }

  async openJournalPage(query: {
    readonly limit: number;
    readonly after?: JournalCursor;
  }): Promise<Page<JournalEntry, JournalCursor>> {
    const { limit, after } = validateJournalPageQuery(query);
    const keyset = journalKeyset(after);
    const rows = await inTransaction(this.#pool, 'openJournalPage', (tx) =>
      tx.rows(EXECUTION_SQL.openJournalPage, [keyset.afterAtMs, keyset.afterAttemptId, keyset.afterAction, limit]),
    );
    return journalPageOf(rows, limit);
  }

  async closeJournalEntry(entry: {
    readonly attemptId: string;
    readonly action: 'delete' | 'quarantine';
  }): Promise<void> {
    const { attemptId, action } = validateJournalEntryRef(entry);
    await inTransaction(this.#pool, 'closeJournalEntry', (tx) =>
      tx.rows(EXECUTION_SQL.closeJournal, [attemptId, action]),
    );
  }

  async listAttemptEvents(runId: string, attemptId: string): Promise<AttemptEvent[]> {
    const ids = [validateId(runId, 'runId'), validateId(attemptId, 'attemptId')];
    const rows = await inTransaction(this.#pool, 'listAttemptEvents', (tx) =>
      tx.rows(EXECUTION_SQL.listAttemptEvents, ids),
    );
    return attemptEventsOf(rows);
  }
}
