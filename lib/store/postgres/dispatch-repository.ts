// PostgresDispatchRepository (design/dispatch §2.2, §2.4, §2.6; design/postgres §D3, §D7-D8; design/architecture §7): claim and
// recordResult as short transactions that lock Run → Attempt → Dispatch and read time only from
// transaction_timestamp(); the bounded due page; the record read.
import type { Pool } from 'pg';

import {
  buildDispatchEventPayload,
  classifyResult,
  leaseTokenDigest,
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
import { duePageOf, FIRST_DUE_CURSOR } from '../due-page';
import { DISPATCH_SQL } from './dispatch-statements';
import { inOneStatement, inTransaction, readInOneStatement, type OneStatement } from './transaction';

export interface PostgresRepositoryOptions {
  /**
   * Accepted so one factory can build either store, and ignored: the database is the only clock
   * (design/postgres §D3). A test passes a clock ten years off to prove it.
   */
  readonly clock?: () => number;
  /**
   * Named prepared statements (default true): claim and recordResult are parsed once per
   * connection. Set false behind a pooler in transaction mode, which may hand each statement to
   * another server connection that never saw the Parse (docs/decisions/0021).
   */
  readonly preparedStatements?: boolean;
}

/** The JSON the dispatch functions return: a typed outcome, the row in record shape, the event's place. */
interface WireOutcome {
  readonly kind: string;
  readonly reason?: string;
  readonly record?: unknown;
  readonly seq?: number;
  readonly nowMs?: number;
}

const CLAIM_KINDS: ReadonlySet<string> = new Set(['leased', 'not_due', 'dispatched', 'blocked', 'attempt_conflict']);

function claimOutcomeOf(operation: string, outcome: WireOutcome | undefined, token: string): ClaimOutcome {
  if (outcome === undefined) throw storeInvariant('postgres', operation, 'the dispatch function returned no row');
  if (outcome.kind === 'claimed') return { kind: 'claimed', record: validateDispatchRecord(outcome.record), token };
  if (outcome.kind === 'not_eligible')
    return {
      kind: 'not_eligible',
      reason: outcome.reason as Extract<ClaimOutcome, { kind: 'not_eligible' }>['reason'],
    };
  if (CLAIM_KINDS.has(outcome.kind)) return { kind: outcome.kind } as ClaimOutcome;
  throw storeInvariant('postgres', operation, 'pidfence_claim answered an outcome that does not exist');
}

/** The eleven arguments of pidfence_record_result for one command. */
function recordResultValues(command: RecordResultCommand): unknown[] {
  const settled = classifyResult(command.result);
  return [
    command.runId,
    command.attemptId,
    command.owner,
    leaseTokenDigest(command.token),
    command.expectedVersion,
    settled.status,
    command.result,
    // The validator guarantees retryDelayMs for exactly the retryable results.
    settled.retryable ? (command.retryDelayMs ?? 0) : null,
    settled.status === 'blocked',
    command.eventId,
    settled.eventType,
  ];
}

function recordOutcomeOf(
  operation: string,
  outcome: WireOutcome | undefined,
  command: RecordResultCommand,
): RecordResultOutcome {
  if (outcome?.kind === 'stale_fence') return { kind: 'stale_fence' };
  if (outcome?.kind !== 'recorded' || outcome.seq === undefined || outcome.nowMs === undefined) {
    throw storeInvariant('postgres', operation, 'pidfence_record_result answered an outcome that does not exist');
  }
  const record = validateDispatchRecord(outcome.record);
  const event: RunEvent<DispatchEventPayload> = {
    id: command.eventId,
    runId: command.runId,
    seq: outcome.seq,
    type: classifyResult(command.result).eventType,
    createdAtMs: outcome.nowMs,
    payload: buildDispatchEventPayload({
      attemptId: record.attemptId,
      dispatchCount: record.dispatchCount,
      result: command.result,
    }),
  };
  return { kind: 'recorded', record, event };
}

export class PostgresDispatchRepository implements DispatchRepository {
  readonly #pool: Pool;
  readonly #prepared: boolean;

  constructor(pool: Pool, options: PostgresRepositoryOptions = {}) {
    this.#pool = pool;
    this.#prepared = options.preparedStatements ?? true;
  }

  /**
   * design/dispatch §2.2 in one round trip: pidfence_claim, which is pidfence_claim_page with one item
   * (migration 0015, docs/decisions/0231), locks, decides and writes.
   */
  async claim(command: ClaimCommand): Promise<ClaimOutcome> {
    const valid = validateClaimCommand(command);
    const [row] = await this.#rows('claim', 'claimCall', [
      valid.runId,
      valid.attemptId,
      valid.cancelRequestedAtMs,
      valid.owner,
      leaseTokenDigest(valid.token),
      valid.leaseDurationMs,
    ]);
    return claimOutcomeOf('claim', row?.outcome, valid.token);
  }

  /**
   * docs/decisions/0023 in one round trip: pidfence_claim_page (migration 0012, docs/decisions/0024)
   * locks every Run, then every Attempt, then every Dispatch of the page in run-id order, and decides
   * each item as pidfence_claim would, in a few set-based statements.
   */
  async claimPage(command: ClaimPageCommand): Promise<ClaimOutcome[]> {
    const commands = validateClaimPageCommand(command);
    const first = commands[0] as ClaimCommand;
    const ordered = [...commands].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    const rows = await this.#rows('claimPage', 'claimPageCall', [
      ordered.map((c) => c.runId),
      ordered.map((c) => c.attemptId),
      ordered.map((c) => c.cancelRequestedAtMs),
      first.owner,
      ordered.map((c) => leaseTokenDigest(c.token)),
      first.leaseDurationMs,
    ]);
    const byRun = new Map(rows.map((row) => [row.runId, row.outcome]));
    return commands.map((c) => claimOutcomeOf('claimPage', byRun.get(c.runId), c.token));
  }

  /**
   * docs/decisions/0025 in one round trip: the due query and pidfence_claim_due_page in one
   * statement; an item whose run another transaction holds comes back `passed_over`.
   */
  async claimDuePage(command: ClaimDuePageCommand): Promise<ClaimedDuePage> {
    const { owner, leaseDurationMs, tokens, after, runnerId } = validateClaimDuePageCommand(command);
    const cursor = after ?? FIRST_DUE_CURSOR;
    const rows = await inOneStatement<DueItem & { outcome: WireOutcome | null }>(this.#pool, 'claimDuePage', {
      name: this.#prepared ? 'pidfence_claimDuePageCall_v1' : undefined,
      text: DISPATCH_SQL.claimDuePageCall,
      values: [
        cursor.atMs,
        cursor.runId,
        tokens.length,
        runnerId,
        owner,
        tokens.map(leaseTokenDigest),
        leaseDurationMs,
      ],
    });
    const page = duePageOf(rows, tokens.length);
    return {
      items: page.items.map((item, i) => {
        const outcome = rows[i]?.outcome ?? null;
        return {
          item,
          outcome:
            outcome === null
              ? { kind: 'passed_over' as const }
              : claimOutcomeOf('claimDuePage', outcome, tokens[i] as string),
        };
      }),
      next: page.next,
    };
  }

  /**
   * design/dispatch §2.4 in one round trip: pidfence_record_result, which is pidfence_record_results with
   * one command (migration 0015, docs/decisions/0231), settles, reserves the sequence, appends.
   */
  async recordResult(command: RecordResultCommand): Promise<RecordResultOutcome> {
    const valid = validateRecordResultCommand(command);
    const [row] = await this.#rows('recordResult', 'recordResultCall', recordResultValues(valid));
    return recordOutcomeOf('recordResult', row?.outcome, valid);
  }

  /**
   * docs/decisions/0023 in one round trip: pidfence_record_results (migration 0012, docs/decisions/0024)
   * settles each command as pidfence_record_result would, set-based.
   */
  async recordResults(commands: readonly RecordResultCommand[]): Promise<RecordResultOutcome[]> {
    const valid = validateRecordResultsCommand(commands);
    const ordered = [...valid].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    const columns = ordered.map(recordResultValues);
    const column = (i: number) => columns.map((values) => values[i]);
    const rows = await this.#rows(
      'recordResults',
      'recordResultsCall',
      Array.from({ length: 11 }, (_, i) => column(i)),
    );
    const byRun = new Map(rows.map((row) => [row.runId, row.outcome]));
    return valid.map((command) => recordOutcomeOf('recordResults', byRun.get(command.runId), command));
  }

  #rows(
    operation: string,
    name: 'claimCall' | 'claimPageCall' | 'recordResultCall' | 'recordResultsCall',
    values: readonly unknown[],
  ): Promise<Array<{ runId?: string; outcome: WireOutcome }>> {
    const statement: OneStatement = {
      name: this.#prepared ? `pidfence_${name}_v2` : undefined,
      text: DISPATCH_SQL[name],
      values,
    };
    return inOneStatement<{ runId?: string; outcome: WireOutcome }>(this.#pool, operation, statement);
  }

  async duePage(query: DuePageQuery = {}): Promise<DuePage> {
    const { limit, after, runnerId } = validateDuePageQuery(query);
    const cursor = after ?? FIRST_DUE_CURSOR;
    // One round trip, parsed once per connection (docs/decisions/0024).
    const rows = await readInOneStatement<DueItem>(this.#pool, 'duePage', {
      name: this.#prepared ? 'pidfence_duePage_v1' : undefined,
      text: DISPATCH_SQL.duePage,
      values: [cursor.atMs, cursor.runId, limit, runnerId],
    });
    return duePageOf(rows, limit);
  }

  async getRecord(runId: string): Promise<CancellationDispatchRecord | null> {
    const id = validateId(runId, 'runId');
    const rows = await inTransaction(this.#pool, 'getRecord', (tx) => tx.rows(DISPATCH_SQL.selectDispatch, [id]));
    return rows[0] === undefined ? null : validateDispatchRecord(rows[0]);
  }
}
