// PostgresDispatchRepository (design/dispatch §2.2, §2.4, §2.6; design/postgres §D3, §D7-D8; design/architecture §7): claim and
// recordResult as short transactions that lock Run → Attempt → Dispatch and read time only from
// transaction_timestamp(); the bounded due page; the record read.
import type { Pool } from 'pg';

import {
  buildDispatchEventPayload,
  classifyResult,
  leaseTokenDigest,
  validateClaimCommand,
  validateDispatchRecord,
  validateDuePageQuery,
  validateId,
  validateRecordResultCommand,
  type AttemptStatus,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type ClaimOutcome,
  type DispatchEventPayload,
  type DueItem,
  type DuePage,
  type DuePageQuery,
  type RecordResultCommand,
  type RecordResultOutcome,
  type RunEvent,
} from '../../contract/index';
import { storeInvariant } from '../store-errors';
import type { DispatchRepository } from '../dispatch-repository';
import { duePageOf, FIRST_DUE_CURSOR, settlementOf } from '../dispatch-decisions';
import { appendRunEvent, lockRun } from './run-events';
import { SQL } from './statements';
import { inOneStatement, inTransaction, type OneStatement, type Tx } from './transaction';

/**
 * Test-only seams, called inside the transaction between statements, so a test can prove what a
 * dropped connection leaves behind. Production code never passes them. With a hook, recordResult
 * runs statement by statement (the pre-0007 path, docs/decisions/0021) so the hook has a "between".
 */
export interface PostgresStoreHooks {
  /** recordResult: after the dispatch row was updated, before the run CAS and the event insert. */
  readonly afterDispatchUpdate?: (session: { readonly processId: number }) => Promise<void>;
}

export interface PostgresRepositoryOptions {
  /**
   * Accepted so one factory can build either store, and ignored: the database is the only clock
   * (design/postgres §D3). A test passes a clock ten years off to prove it.
   */
  readonly clock?: () => number;
  /** Test-only, see PostgresStoreHooks. */
  readonly hooks?: PostgresStoreHooks;
  /**
   * Named prepared statements (default true): claim and recordResult are parsed once per
   * connection. Set false behind a pooler in transaction mode, which may hand each statement to
   * another server connection that never saw the Parse (docs/decisions/0021).
   */
  readonly preparedStatements?: boolean;
}

/** The JSON the 0007 functions return: a typed outcome, the row in record shape, the event's place. */
interface WireOutcome {
  readonly kind: string;
  readonly reason?: string;
  readonly record?: unknown;
  readonly seq?: number;
  readonly nowMs?: number;
}

const CLAIM_KINDS: ReadonlySet<string> = new Set(['leased', 'not_due', 'dispatched', 'blocked', 'attempt_conflict']);

export class PostgresDispatchRepository implements DispatchRepository {
  readonly #pool: Pool;
  readonly #hooks: PostgresStoreHooks;
  readonly #prepared: boolean;

  constructor(pool: Pool, options: PostgresRepositoryOptions = {}) {
    this.#pool = pool;
    this.#hooks = options.hooks ?? {};
    this.#prepared = options.preparedStatements ?? true;
  }

  /** design/dispatch §2.2 in one round trip: pidfence_claim locks, decides and writes (migration 0007). */
  async claim(command: ClaimCommand): Promise<ClaimOutcome> {
    const valid = validateClaimCommand(command);
    const outcome = await this.#call('claim', 'claimCall', [
      valid.runId, valid.attemptId, valid.cancelRequestedAtMs, valid.owner, leaseTokenDigest(valid.token), valid.leaseDurationMs,
    ]);
    if (outcome.kind === 'claimed') return { kind: 'claimed', record: validateDispatchRecord(outcome.record), token: valid.token };
    if (outcome.kind === 'not_eligible') return { kind: 'not_eligible', reason: outcome.reason as Extract<ClaimOutcome, { kind: 'not_eligible' }>['reason'] };
    if (CLAIM_KINDS.has(outcome.kind)) return { kind: outcome.kind } as ClaimOutcome;
    throw storeInvariant('postgres', 'claim', 'pidfence_claim answered an outcome that does not exist');
  }

  /** design/dispatch §2.4 in one round trip: pidfence_record_result settles, reserves the sequence, appends. */
  async recordResult(command: RecordResultCommand): Promise<RecordResultOutcome> {
    const valid = validateRecordResultCommand(command);
    if (this.#hooks.afterDispatchUpdate !== undefined) {
      return inTransaction(this.#pool, 'recordResult', (tx) => this.#recordResultLocked(tx, valid));
    }
    const settled = classifyResult(valid.result);
    const outcome = await this.#call('recordResult', 'recordResultCall', [
      valid.runId, valid.attemptId, valid.owner, leaseTokenDigest(valid.token), valid.expectedVersion, settled.status, valid.result,
      // The validator guarantees retryDelayMs for exactly the retryable results.
      settled.retryable ? valid.retryDelayMs ?? 0 : null, settled.status === 'blocked', valid.eventId, settled.eventType,
    ]);
    if (outcome.kind === 'stale_fence') return { kind: 'stale_fence' };
    if (outcome.kind !== 'recorded' || outcome.seq === undefined || outcome.nowMs === undefined) {
      throw storeInvariant('postgres', 'recordResult', 'pidfence_record_result answered an outcome that does not exist');
    }
    const record = validateDispatchRecord(outcome.record);
    const event: RunEvent<DispatchEventPayload> = {
      id: valid.eventId, runId: valid.runId, seq: outcome.seq, type: settled.eventType, createdAtMs: outcome.nowMs,
      payload: buildDispatchEventPayload({ attemptId: record.attemptId, dispatchCount: record.dispatchCount, result: valid.result }),
    };
    return { kind: 'recorded', record, event };
  }

  async #call(operation: string, name: 'claimCall' | 'recordResultCall', values: readonly unknown[]): Promise<WireOutcome> {
    const statement: OneStatement = { name: this.#prepared ? `pidfence_${name}_v1` : undefined, text: SQL[name], values };
    const [row] = await inOneStatement<{ outcome: WireOutcome }>(this.#pool, operation, statement);
    if (row === undefined) throw storeInvariant('postgres', operation, 'the dispatch function returned no row');
    return row.outcome;
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

  /** The statement-by-statement recordResult, kept for the test hook: same lock order, fences, CAS and append. */
  async #recordResultLocked(tx: Tx, command: RecordResultCommand): Promise<RecordResultOutcome> {
    const run = await lockRun(tx, command.runId);
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
