// SqliteDispatchRepository (design/dispatch §2.2, §2.4, §2.6; design/architecture §7): claim, recordResult and the
// bounded due page on better-sqlite3 12, each write one short BEGIN IMMEDIATE transaction.
import {
  buildDispatchEventPayload,
  validateClaimCommand,
  validateClaimDuePageCommand,
  validateClaimPageCommand,
  validateDispatchRecord,
  validateDuePageQuery,
  validateId,
  validateRecordResultCommand,
  validateRecordResultsCommand,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type ClaimDuePageCommand,
  type ClaimedDuePage,
  type ClaimOutcome,
  type ClaimPageCommand,
  type DueCursor,
  type DuePage,
  type DuePageQuery,
  type RecordResultCommand,
  type RecordResultOutcome,
} from '../../contract/index';
import type { DispatchRepository } from '../dispatch-repository';
import { duePageOf, FIRST_DUE_CURSOR } from '../due-page';
import { planClaim, settlementOf } from './dispatch-rules';
import { storeInvariant } from '../store-errors';
import { boundaryOf, type SqliteBoundary } from './transaction';
import type { Clock } from './clock';
import type { SqliteDatabase } from './database';
import { appendRunEvent } from './run-events';
import { selectAttemptStatus, selectDispatch, selectHeldRunVersion, selectRun, type DueRow } from './rows';
import type { PreparedStatements } from './prepared';

export interface SqliteDispatchRepositoryOptions {
  /** The time authority; the boot-anchored store clock (docs/decisions/0160) unless a test or a device needs another. */
  readonly clock?: Clock;
}

export class SqliteDispatchRepository implements DispatchRepository {
  readonly #boundary: SqliteBoundary;
  readonly #statements: PreparedStatements;

  constructor(database: SqliteDatabase, options: SqliteDispatchRepositoryOptions = {}) {
    this.#boundary = boundaryOf(database, options.clock);
    this.#statements = this.#boundary.statements;
  }

  async claim(command: ClaimCommand): Promise<ClaimOutcome> {
    const valid = validateClaimCommand(command);
    return this.#boundary.write('claim', (nowMs) => this.#claimLocked(valid, nowMs));
  }

  /** docs/decisions/0023: every item of the page under one BEGIN IMMEDIATE, each its own claim. */
  async claimPage(command: ClaimPageCommand): Promise<ClaimOutcome[]> {
    const commands = validateClaimPageCommand(command);
    return this.#boundary.write('claimPage', (nowMs) => commands.map((valid) => this.#claimLocked(valid, nowMs)));
  }

  /**
   * docs/decisions/0025: the due page and its claims under one BEGIN IMMEDIATE. SQLite has one
   * writer at a time, so no item is ever passed over. An empty page is answered by a read alone:
   * an idle cycle opens no write transaction.
   */
  async claimDuePage(command: ClaimDuePageCommand): Promise<ClaimedDuePage> {
    const { owner, leaseDurationMs, tokens, after, runnerId } = validateClaimDuePageCommand(command);
    const seen = this.#boundary.read('claimDuePage', () =>
      this.#duePageAt(this.#boundary.now(), tokens.length, after, runnerId),
    );
    if (seen.items.length === 0) return { items: [], next: seen.next };
    return this.#boundary.write('claimDuePage', (nowMs) => {
      const page = this.#duePageAt(nowMs, tokens.length, after, runnerId);
      return {
        items: page.items.map((item, i) => ({
          item,
          outcome: this.#claimLocked(
            {
              runId: item.runId,
              attemptId: item.attemptId,
              cancelRequestedAtMs: item.cancelRequestedAtMs,
              owner,
              token: tokens[i] as string,
              leaseDurationMs,
            },
            nowMs,
          ),
        })),
        next: page.next,
      };
    });
  }

  async recordResult(command: RecordResultCommand): Promise<RecordResultOutcome> {
    const valid = validateRecordResultCommand(command);
    return this.#boundary.write('recordResult', (nowMs) => this.#recordResultLocked(valid, nowMs));
  }

  /** docs/decisions/0023: every settle of the page under one BEGIN IMMEDIATE, each with its own fence. */
  async recordResults(commands: readonly RecordResultCommand[]): Promise<RecordResultOutcome[]> {
    const valid = validateRecordResultsCommand(commands);
    return this.#boundary.write('recordResults', (nowMs) =>
      valid.map((command) => this.#recordResultLocked(command, nowMs)),
    );
  }

  async duePage(query: DuePageQuery = {}): Promise<DuePage> {
    const { limit, after, runnerId } = validateDuePageQuery(query);
    return this.#boundary.read('duePage', () => this.#duePageAt(this.#boundary.now(), limit, after, runnerId));
  }

  #duePageAt(nowMs: number, limit: number, after: DueCursor | null, runnerId: string | null): DuePage {
    const cursor = after ?? FIRST_DUE_CURSOR;
    const rows = this.#statements.duePage.all({
      afterAtMs: cursor.atMs,
      afterRunId: cursor.runId,
      nowMs,
      limit,
      runnerId,
    }) as DueRow[];
    return duePageOf(rows, limit);
  }

  async getRecord(runId: string): Promise<CancellationDispatchRecord | null> {
    const id = validateId(runId, 'runId');
    return this.#boundary.read('getRecord', () => selectDispatch(this.#statements, id)) ?? null;
  }

  /** design/dispatch §2.2, inside BEGIN IMMEDIATE: `nowMs` was read after the write lock was held. */
  #claimLocked(command: ClaimCommand, nowMs: number): ClaimOutcome {
    const run = selectRun(this.#statements, command.runId);
    const attemptStatus = selectAttemptStatus(this.#statements, command.runId, command.attemptId);
    const existing = run === undefined ? undefined : selectDispatch(this.#statements, command.runId);
    const plan = planClaim(command, run, attemptStatus, existing, nowMs);
    if (plan.kind === 'refuse') return plan.outcome;
    const lease = { ...plan.lease, runId: command.runId, attemptId: command.attemptId };
    // planClaim refuses a missing run, so an insert always has the run's project.
    const written =
      plan.kind === 'insert'
        ? this.#statements.insertLeasedDispatch.get({ ...lease, projectId: run?.projectId ?? null })
        : this.#statements.leaseDispatch.get({ ...lease, version: plan.version });
    // Impossible under BEGIN IMMEDIATE: the row was read (or found absent) in this transaction.
    if (written === undefined)
      throw storeInvariant('sqlite', 'claim', 'the lease CAS lost inside its own write transaction');
    return { kind: 'claimed', record: validateDispatchRecord(written), token: command.token };
  }

  /** design/dispatch §2.4, inside BEGIN IMMEDIATE: fence-checked settle, run version CAS, event append. */
  #recordResultLocked(command: RecordResultCommand, nowMs: number): RecordResultOutcome {
    const settlement = settlementOf(command, nowMs);
    const settled = this.#statements.settleDispatch.get({
      runId: command.runId,
      attemptId: command.attemptId,
      owner: command.owner,
      expectedVersion: command.expectedVersion,
      digest: settlement.digest,
      status: settlement.status,
      result: settlement.result,
      nextAttemptAtMs: settlement.nextAttemptAtMs,
      blockedAtMs: settlement.blockedAtMs,
      nowMs: settlement.nowMs,
    });
    if (settled === undefined) return { kind: 'stale_fence' };
    const record = validateDispatchRecord(settled);
    const event = appendRunEvent(this.#statements, {
      runId: command.runId,
      version: selectHeldRunVersion(this.#statements, command.runId, 'recordResult'),
      type: settlement.eventType,
      eventId: command.eventId,
      payload: buildDispatchEventPayload({
        attemptId: record.attemptId,
        dispatchCount: record.dispatchCount,
        result: command.result,
      }),
      nowMs: settlement.nowMs,
    });
    return { kind: 'recorded', record, event };
  }
}
