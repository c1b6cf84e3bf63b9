// SqliteDispatchRepository (design/dispatch §2.2, §2.4, §2.6; design/architecture §7): claim, recordResult and the
// bounded due page on better-sqlite3 12, each write one short BEGIN IMMEDIATE transaction.
import {
  buildDispatchEventPayload,
  validateClaimCommand,
  validateDispatchRecord,
  validateDuePageQuery,
  validateId,
  validateRecordResultCommand,
  type AttemptStatus,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type ClaimOutcome,
  type ClaimRunFacts,
  type DuePage,
  type DuePageQuery,
  type RecordResultCommand,
  type RecordResultOutcome,
  type RunRecord,
} from '../../contract/index';
import type { DispatchRepository } from '../dispatch-repository';
import { duePageOf, FIRST_DUE_CURSOR, planClaim, settlementOf } from '../dispatch-decisions';
import { storeFailure } from '../store-errors';
import { readClock, type Clock } from './clock';
import type { SqliteDatabase } from './database';
import { appendRunEvent } from './run-events';
import { prepareStatements, type DueRow, type PreparedStatements } from './statements';

export interface SqliteDispatchRepositoryOptions {
  /** The time authority; Date.now unless a test or a device needs another. */
  readonly clock?: Clock;
}

export class SqliteDispatchRepository implements DispatchRepository {
  readonly #statements: PreparedStatements;
  readonly #clock: Clock;
  readonly #claim: (command: ClaimCommand) => ClaimOutcome;
  readonly #recordResult: (command: RecordResultCommand) => RecordResultOutcome;

  constructor(database: SqliteDatabase, options: SqliteDispatchRepositoryOptions = {}) {
    this.#statements = prepareStatements(database);
    this.#clock = options.clock ?? Date.now;
    const claim = database.transaction((command: ClaimCommand) => this.#claimLocked(command));
    const recordResult = database.transaction((command: RecordResultCommand) => this.#recordResultLocked(command));
    this.#claim = (command) => claim.immediate(command);
    this.#recordResult = (command) => recordResult.immediate(command);
  }

  async claim(command: ClaimCommand): Promise<ClaimOutcome> {
    const valid = validateClaimCommand(command);
    try {
      return this.#claim(valid);
    } catch (error) {
      throw storeFailure('sqlite', 'claim', error);
    }
  }

  async recordResult(command: RecordResultCommand): Promise<RecordResultOutcome> {
    const valid = validateRecordResultCommand(command);
    try {
      return this.#recordResult(valid);
    } catch (error) {
      throw storeFailure('sqlite', 'recordResult', error);
    }
  }

  async duePage(query: DuePageQuery = {}): Promise<DuePage> {
    const { limit, after, runnerId } = validateDuePageQuery(query);
    try {
      const cursor = after ?? FIRST_DUE_CURSOR;
      const rows = this.#statements.duePage.all({ afterAtMs: cursor.atMs, afterRunId: cursor.runId, nowMs: readClock(this.#clock), limit, runnerId }) as DueRow[];
      return duePageOf(rows, limit);
    } catch (error) {
      throw storeFailure('sqlite', 'duePage', error);
    }
  }

  async getRecord(runId: string): Promise<CancellationDispatchRecord | null> {
    const id = validateId(runId, 'runId');
    const row = this.#statements.selectDispatch.get(id);
    return row === undefined ? null : validateDispatchRecord(row);
  }

  /** design/dispatch §2.2, inside BEGIN IMMEDIATE: the clock is read after the write lock is held. */
  #claimLocked(command: ClaimCommand): ClaimOutcome {
    const nowMs = readClock(this.#clock);
    const run = this.#statements.selectRun.get(command.runId) as (RunRecord & ClaimRunFacts) | undefined;
    const attempt = this.#statements.selectAttempt.get(command.runId, command.attemptId) as { status: AttemptStatus } | undefined;
    const existing = run === undefined ? undefined : this.#statements.selectDispatch.get(command.runId);
    const plan = planClaim(command, run, attempt?.status, existing === undefined ? undefined : validateDispatchRecord(existing), nowMs);
    if (plan.kind === 'refuse') return plan.outcome;
    const lease = { ...plan.lease, runId: command.runId, attemptId: command.attemptId };
    const written = plan.kind === 'insert'
      ? this.#statements.insertLeasedDispatch.get({ ...lease, projectId: (run as RunRecord).projectId })
      : this.#statements.leaseDispatch.get({ ...lease, version: plan.version });
    if (written === undefined) {
      throw storeFailure('sqlite', 'claim', { code: 'PIDFENCE_LEASE_CAS_LOST' });
    }
    return { kind: 'claimed', record: validateDispatchRecord(written), token: command.token };
  }

  /** design/dispatch §2.4, inside BEGIN IMMEDIATE: fence-checked settle, run version CAS, event append. */
  #recordResultLocked(command: RecordResultCommand): RecordResultOutcome {
    const settlement = settlementOf(command, readClock(this.#clock));
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
    const run = this.#statements.selectRun.get(command.runId) as RunRecord;
    const event = appendRunEvent(this.#statements, {
      runId: command.runId,
      version: run.version,
      type: settlement.eventType,
      eventId: command.eventId,
      payload: buildDispatchEventPayload({ attemptId: record.attemptId, dispatchCount: record.dispatchCount, result: command.result }),
      nowMs: settlement.nowMs,
    });
    return { kind: 'recorded', record, event };
  }
}
