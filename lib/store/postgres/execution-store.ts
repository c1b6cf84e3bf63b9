// PostgresExecutionStore (design/execution §2-3): keyset pages of active attempts and due deadlines on the
// partial indexes, the terminal CAS with attempt and run events in one transaction (locks Run →
// Attempt), and the receipt journal; transaction_timestamp() is the only clock (design/postgres §D3).
import type { Pool } from 'pg';

import {
  type ActiveAttempt,
  type ActiveCursor,
  type AttemptEvent,
  type AttemptRecord,
  type RunRecord,
  validateRunRecord,
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
import { lockRunsInOrder, type LockedRun } from './run-events';
import { storeInvariant } from '../store-errors';
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

  /** A page of one (docs/decisions/0446): the same statements as any page. */
  async completeAttempt(command: CompleteAttemptCommand): Promise<CompleteAttemptOutcome> {
    const valid = validateCompleteAttemptCommand(command);
    const [outcome] = await inTransaction(this.#pool, 'completeAttempt', (tx) => completePageLocked(tx, [valid]));
    return outcome as CompleteAttemptOutcome;
  }

  /**
   * The page's ends in one transaction (docs/decisions/0431), each the single CAS, in command order,
   * in a few statements whatever the page's size (docs/decisions/0446). The page's runs are locked
   * first, in the database's id order (as a completion page's release and every other several-run
   * lock take them), so two pages never wait on each other in a cycle; then their attempts.
   */
  async completeAttempts(commands: readonly CompleteAttemptCommand[]): Promise<CompleteAttemptOutcome[]> {
    const valid = validateCompleteAttemptsCommand(commands);
    return inTransaction(this.#pool, 'completeAttempts', (tx) => completePageLocked(tx, valid));
  }

  async recordQuarantineIntent(command: {
    readonly runId: string;
    readonly attemptId: string;
    readonly reason: QuarantineReason;
  }): Promise<void> {
    const { runId, attemptId, reason } = validateQuarantineIntent(command);
    await inTransaction(this.#pool, 'recordQuarantineIntent', (tx) =>
      tx.rows(EXECUTION_SQL.insertJournals, [[attemptId], ['quarantine'], [runId], [reason]]),
    );
  }

  async recordReceiptDeletion(command: { readonly runId: string; readonly attemptId: string }): Promise<void> {
    const { runId, attemptId } = validateAttemptRef(command);
    await inTransaction(this.#pool, 'recordReceiptDeletion', (tx) =>
      tx.rows(EXECUTION_SQL.insertJournals, [[attemptId], ['delete'], [runId], [null]]),
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

/** An end the CAS goes on with: the command as the run's intent leaves it, under its locks. */
interface DecidedEnd {
  readonly end: CompleteAttemptCommand;
  readonly run: LockedRun;
  readonly attempt: AttemptRecord;
}

/**
 * Locks Run → Attempt for the page (the order of every write transaction), decides each end as the
 * single CAS does (completionRefusal, endUnderIntent), then writes the ends together at the run
 * locks' time: the attempts' CAS, their attempt events, the runs' terminal states with their events,
 * and the receipts' journal rows (design/execution §2 order: attempt event first).
 */
async function completePageLocked(
  tx: Tx,
  commands: readonly CompleteAttemptCommand[],
): Promise<CompleteAttemptOutcome[]> {
  const runs = await lockRunsInOrder(
    tx,
    commands.map((command) => command.runId),
  );
  const attempts = new Map<string, AttemptRecord>();
  const attemptRows = await tx.rows(EXECUTION_SQL.lockAttemptRecords, [
    commands.map((command) => command.runId),
    commands.map((command) => command.attemptId),
  ]);
  for (const row of attemptRows) {
    const attempt = validateAttemptRecord(row);
    attempts.set(attempt.runId, attempt);
  }
  const decided = commands.map((command): CompleteAttemptOutcome | DecidedEnd => {
    const run = runs.get(command.runId);
    const attempt = attempts.get(command.runId);
    const refusal = completionRefusal(attempt, run);
    if (refusal !== null || attempt === undefined || run === undefined) return refusal ?? { kind: 'missing' };
    return { end: endUnderIntent(command, run), run, attempt };
  });
  const ends = decided.filter((item): item is DecidedEnd => 'end' in item);
  const written = ends.length === 0 ? new Map<string, CompleteAttemptOutcome>() : await writeEnds(tx, ends);
  return decided.map((item) =>
    'end' in item ? (written.get(item.end.runId) ?? { kind: 'already_terminal', attempt: item.attempt }) : item,
  );
}

/** The writes of the decided ends; an attempt another end already closed is left out (already_terminal). */
async function writeEnds(tx: Tx, ends: readonly DecidedEnd[]): Promise<Map<string, CompleteAttemptOutcome>> {
  const nowMs = (ends[0] as DecidedEnd).run.nowMs;
  const ended = new Map<string, AttemptRecord>();
  const endedRows = await tx.rows(RUN_SQL.endAttempts, [
    ends.map(({ end }) => end.runId),
    ends.map(({ end }) => end.attemptId),
    ends.map(({ end }) => end.status),
    nowMs,
  ]);
  for (const row of endedRows) {
    const attempt = validateAttemptRecord(row);
    ended.set(attempt.runId, attempt);
  }
  const closing = ends.filter(({ end }) => ended.has(end.runId));
  const outcomes = new Map<string, CompleteAttemptOutcome>();
  if (closing.length === 0) return outcomes;
  await tx.rows(EXECUTION_SQL.insertAttemptEndEvents, [
    closing.map(({ end }) => end.runId),
    closing.map(({ end }) => end.attemptId),
    closing.map(({ end }) => end.attemptEventId),
    closing.map(({ end }) => attemptTerminalPayload(end)),
    nowMs,
  ]);
  const after = await writeRunsTerminal(tx, closing, nowMs);
  await tx.rows(RUN_SQL.insertEvents, [
    closing.map(({ end }) => end.runId),
    closing.map(({ end }) => (after.get(end.runId) as { seq: number }).seq),
    closing.map(({ end }) => end.runEventId),
    closing.map(() => 'run.terminal'),
    closing.map(({ end }) => JSON.stringify(runTerminalPayload(end))),
    nowMs,
  ]);
  const journaled = closing.filter(({ end }) => end.journalReceipt);
  if (journaled.length > 0)
    await tx.rows(EXECUTION_SQL.insertJournals, [
      journaled.map(({ end }) => end.attemptId),
      journaled.map(() => 'delete'),
      journaled.map(({ end }) => end.runId),
      journaled.map(() => null),
    ]);
  for (const { end } of closing) {
    const { run } = after.get(end.runId) as { run: RunRecord };
    outcomes.set(end.runId, { kind: 'completed', run, attempt: ended.get(end.runId) as AttemptRecord });
  }
  return outcomes;
}

/** The runs' terminal states and their events' sequences, by the version CAS read under the run locks. */
async function writeRunsTerminal(
  tx: Tx,
  closing: readonly DecidedEnd[],
  nowMs: number,
): Promise<Map<string, { readonly seq: number; readonly run: RunRecord }>> {
  const rows = await tx.rows(RUN_SQL.writeRunsTerminal, [
    closing.map(({ end }) => end.runId),
    closing.map(({ run }) => run.version),
    closing.map(({ end }) => end.status),
    nowMs,
  ]);
  // Impossible under the run locks: each version and status was read under them in this transaction.
  if (rows.length !== closing.length)
    throw storeInvariant('postgres', 'the attempt end page', 'a run changed under its own row lock');
  const after = new Map<string, { readonly seq: number; readonly run: RunRecord }>();
  for (const { seq, ...row } of rows) {
    const run = validateRunRecord(row);
    after.set(run.runId, { seq: validateCounter(seq, 'seq'), run });
  }
  return after;
}
