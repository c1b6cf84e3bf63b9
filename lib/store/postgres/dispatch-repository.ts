// PostgresDispatchRepository (ADR-0005 §2.2, §2.4, §2.6; ADR-0456 §3, §7-8; DESIGN §7): claim and
// recordResult as short transactions that lock Run → Attempt → Dispatch and read time only from
// transaction_timestamp(); the bounded due page; the record read.
import type { Pool } from 'pg';

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
  type DueItem,
  type DuePage,
  type DuePageQuery,
  type RecordResultCommand,
  type RecordResultOutcome,
} from '../../contract/index';
import type { DispatchRepository } from '../dispatch-repository';
import { duePageOf, FIRST_DUE_CURSOR, planClaim, settlementOf } from '../dispatch-steps';
import { appendRunEvent, type LockedRun } from './run-events';
import { SQL } from './statements';
import { inTransaction, type Tx } from './transaction';

/**
 * Test-only seams, called inside the transaction between statements, so a test can prove what a
 * dropped connection leaves behind. Production code never passes them.
 */
export interface PostgresStoreHooks {
  /** recordResult: after the dispatch row was updated, before the run CAS and the event insert. */
  readonly afterDispatchUpdate?: (session: { readonly processId: number }) => Promise<void>;
}

export interface PostgresRepositoryOptions {
  /**
   * Accepted so one factory can build either store, and ignored: the database is the only clock
   * (ADR-0456 §3). A test passes a clock ten years off to prove it.
   */
  readonly clock?: () => number;
  /** Test-only, see PostgresStoreHooks. */
  readonly hooks?: PostgresStoreHooks;
}

export class PostgresDispatchRepository implements DispatchRepository {
  readonly #pool: Pool;
  readonly #hooks: PostgresStoreHooks;

  constructor(pool: Pool, options: PostgresRepositoryOptions = {}) {
    this.#pool = pool;
    this.#hooks = options.hooks ?? {};
  }

  async claim(command: ClaimCommand): Promise<ClaimOutcome> {
    const valid = validateClaimCommand(command);
    return inTransaction(this.#pool, 'claim', (tx) => this.#claimLocked(tx, valid));
  }

  async recordResult(command: RecordResultCommand): Promise<RecordResultOutcome> {
    const valid = validateRecordResultCommand(command);
    return inTransaction(this.#pool, 'recordResult', (tx) => this.#recordResultLocked(tx, valid));
  }

  async duePage(query: DuePageQuery = {}): Promise<DuePage> {
    const { limit, after, runnerId } = validateDuePageQuery(query);
    const cursor = after ?? FIRST_DUE_CURSOR;
    const rows = await inTransaction(this.#pool, 'duePage', (tx) => tx.rows<DueItem>(SQL.duePage, [cursor.atMs, cursor.runId, limit, runnerId]));
    return duePageOf(rows, limit);
  }

  async getRecord(runId: string): Promise<CancellationDispatchRecord | null> {
    const id = validateId(runId, 'runId');
    const rows = await inTransaction(this.#pool, 'getRecord', (tx) => tx.rows(SQL.selectDispatch, [id]));
    return rows[0] === undefined ? null : validateDispatchRecord(rows[0]);
  }

  /** ADR-0005 §2.2 / ADR-0456 §7: lock run, attempt, dispatch in that order, then decide and write. */
  async #claimLocked(tx: Tx, command: ClaimCommand): Promise<ClaimOutcome> {
    const [run] = await tx.rows<LockedRun>(SQL.lockRun, [command.runId]);
    if (run === undefined) return { kind: 'not_eligible', reason: 'run_missing' };
    const [attempt] = await tx.rows<{ status: AttemptStatus }>(SQL.lockAttempt, [command.runId, command.attemptId]);
    const [existing] = await tx.rows(SQL.lockDispatch, [command.runId]);
    const plan = planClaim(command, run, attempt?.status, existing === undefined ? undefined : validateDispatchRecord(existing), run.nowMs);
    if (plan.kind === 'refuse') return plan.outcome;
    const { owner, digest, expiresAtMs, nowMs } = plan.lease;
    const [written] = plan.kind === 'insert'
      ? await tx.rows(SQL.insertLeasedDispatch, [command.runId, run.projectId, command.attemptId, owner, digest, expiresAtMs, nowMs])
      : await tx.rows(SQL.leaseDispatch, [command.runId, command.attemptId, owner, digest, expiresAtMs, nowMs, plan.version]);
    // Impossible while we hold the row lock, unless something wrote the row outside pidfence.
    if (written === undefined) throw new Error('lease CAS lost under the row lock');
    return { kind: 'claimed', record: validateDispatchRecord(written), token: command.token };
  }

  /** ADR-0005 §2.4 / ADR-0456 §8: same lock order; fenced settle, run version CAS, event append. */
  async #recordResultLocked(tx: Tx, command: RecordResultCommand): Promise<RecordResultOutcome> {
    const [run] = await tx.rows<LockedRun>(SQL.lockRun, [command.runId]);
    if (run === undefined) return { kind: 'stale_fence' };
    const [attempt] = await tx.rows(SQL.lockAttempt, [command.runId, command.attemptId]);
    if (attempt === undefined) return { kind: 'stale_fence' };
    const settlement = settlementOf(command, run.nowMs);
    const [settled] = await tx.rows(SQL.settleDispatch, [
      command.runId, command.attemptId, command.owner, settlement.digest, command.expectedVersion,
      settlement.status, settlement.result, settlement.nextAttemptAtMs, settlement.blockedAtMs, settlement.nowMs,
    ]);
    if (settled === undefined) return { kind: 'stale_fence' };
    const record = validateDispatchRecord(settled);
    await this.#hooks.afterDispatchUpdate?.({ processId: tx.processId });
    const { event } = await appendRunEvent(tx, run, {
      type: settlement.eventType,
      eventId: command.eventId,
      payload: buildDispatchEventPayload({ attemptId: record.attemptId, dispatchCount: record.dispatchCount, result: command.result }),
    });
    return { kind: 'recorded', record, event };
  }
}
