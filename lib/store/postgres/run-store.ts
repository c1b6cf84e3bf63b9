// PostgresRunStore (design/architecture §5, design/dispatch §2.2 steps 1-2, design/execution §3): runs, attempts with their
// durable handle, durable cancel intent with its event, and terminal states; database time only.
import type { Pool } from 'pg';

import {
  validateAdvanceAttemptCommand,
  validateCreateAttemptCommand,
  validateCreateRunCommand,
  validateEndAttemptCommand,
  validateEventPage,
  validateAttemptRefs,
  validateId,
  validateMarkTerminalCommand,
  validateProjectCancellationCommand,
  validateRequestCancellationCommand,
  type AdvanceAttemptCommand,
  type AdvanceAttemptOutcome,
  type AttemptRecord,
  type CreateAttemptCommand,
  type CreateAttemptOutcome,
  type CreateRunCommand,
  type CreateRunOutcome,
  type EndAttemptCommand,
  type EndAttemptOutcome,
  type MarkTerminalCommand,
  type MarkTerminalOutcome,
  type ProjectCancellationCommand,
  type ProjectCancellationOutcome,
  type RequestCancellationCommand,
  type RequestCancellationOutcome,
  type RunEvent,
  type RunRecord,
  runIsActive,
  validateAttemptRecord,
  validateCounter,
  validateEpochMs,
  validateRunEvent,
  validateRunRecord,
} from '../../contract/index';
import type { RunStore } from '../run-store';
import { appendRunEvent, lockedRecord, lockRun, type LockedRun } from './run-events';
import { storeInvariant } from '../store-errors';
import { DISPATCH_SQL } from './dispatch-statements';
import { RUN_SQL } from './run-statements';
import { inOneStatement, inTransaction, readInOneStatement, type Tx } from './transaction';

/**
 * The runs one project-wide cancel statement takes (docs/decisions/0320): the 5,000 in one
 * statement, which holds their run locks for one to two seconds on a loaded 2-core machine, well
 * inside the 5 s statement timeout. `more` asks the caller to repeat.
 */
export const PROJECT_CANCEL_LIMIT = 5_000;

function isActive(run: RunRecord): boolean {
  return runIsActive(run.status);
}

export interface PostgresRunStoreOptions {
  /** Accepted and ignored: the database is the only clock (design/postgres §D3). */
  readonly clock?: () => number;
}

export class PostgresRunStore implements RunStore {
  readonly #pool: Pool;

  constructor(pool: Pool, _options: PostgresRunStoreOptions = {}) {
    this.#pool = pool;
  }

  /** Locks the run (lock 1 of the Run → Attempt → Dispatch order) and reads the transaction's time. */
  async #lockRun(tx: Tx, runId: string): Promise<LockedRun | undefined> {
    return lockRun(tx, runId);
  }

  async createRun(command: CreateRunCommand): Promise<CreateRunOutcome> {
    const valid = validateCreateRunCommand(command);
    return inTransaction(this.#pool, 'createRun', async (tx) => {
      const [run] = await tx.rows(RUN_SQL.insertRun, [
        valid.runId,
        valid.projectId,
        valid.owner ?? 'runtime',
        valid.name ?? null,
      ]);
      return run === undefined ? { kind: 'exists' } : { kind: 'created', run: validateRunRecord(run) };
    });
  }

  async createAttempt(command: CreateAttemptCommand): Promise<CreateAttemptOutcome> {
    const valid = validateCreateAttemptCommand(command);
    return inTransaction(this.#pool, 'createAttempt', async (tx) => {
      const run = await this.#lockRun(tx, valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'run_terminal' };
      if ((await tx.rows(RUN_SQL.selectAttemptById, [valid.attemptId])).length > 0) return { kind: 'exists' };
      if ((await tx.rows(RUN_SQL.selectActiveAttempt, [valid.runId])).length > 0)
        return { kind: 'active_attempt_exists' };
      const deadlineAtMs = valid.timeoutMs === undefined ? null : run.nowMs + valid.timeoutMs;
      const [attempt] = await tx.rows(RUN_SQL.insertAttempt, [
        valid.runId,
        valid.attemptId,
        deadlineAtMs,
        valid.receiptTokenDigest ?? null,
        run.nowMs,
        valid.runnerId ?? null,
        valid.leftovers ?? null,
      ]);
      await tx.rows(RUN_SQL.markRunRunning, [valid.runId, run.nowMs]);
      await tx.rows(DISPATCH_SQL.insertPendingDispatch, [valid.runId, run.nowMs]);
      return { kind: 'created', attempt: validateAttemptRecord(attempt) };
    });
  }

  async advanceAttempt(command: AdvanceAttemptCommand): Promise<AdvanceAttemptOutcome> {
    const valid = validateAdvanceAttemptCommand(command);
    return inTransaction(this.#pool, 'advanceAttempt', async (tx) => {
      const [attempt] = await tx.rows(RUN_SQL.advanceAttempt, [
        valid.runId,
        valid.attemptId,
        valid.from,
        valid.to,
        valid.pid ?? null,
        valid.handle ?? null,
      ]);
      return attempt === undefined ? { kind: 'stale' } : { kind: 'advanced', attempt: validateAttemptRecord(attempt) };
    });
  }

  async endAttempt(command: EndAttemptCommand): Promise<EndAttemptOutcome> {
    const valid = validateEndAttemptCommand(command);
    return inTransaction(this.#pool, 'endAttempt', async (tx) => {
      const run = await this.#lockRun(tx, valid.runId);
      if (run === undefined) return { kind: 'stale' };
      const [attempt] = await tx.rows(RUN_SQL.endAttempt, [valid.runId, valid.attemptId, valid.status, run.nowMs]);
      return attempt === undefined ? { kind: 'stale' } : { kind: 'ended', attempt: validateAttemptRecord(attempt) };
    });
  }

  /**
   * One statement in its own transaction: migration 0020's pidfence_request_cancel, the project
   * cancel's intent rule for a page of one run (docs/decisions/0340). A queued run stays queued here.
   */
  async requestCancellation(command: RequestCancellationCommand): Promise<RequestCancellationOutcome> {
    const valid = validateRequestCancellationCommand(command);
    const [row] = await inTransaction(this.#pool, 'requestCancellation', (tx) =>
      tx.rows<{ kind: unknown; seq: unknown; nowMs: unknown }>(RUN_SQL.requestCancelCall, [
        valid.runId,
        valid.reason,
        valid.eventId,
      ]),
    );
    if (row === undefined) throw storeInvariant('postgres', 'the cancel request', 'the statement answered no outcome');
    const { kind, seq, nowMs, ...run } = row;
    if (kind === 'run_missing' || kind === 'run_terminal') return { kind };
    if (kind === 'already_requested') return { kind, run: validateRunRecord(run) };
    if (kind !== 'requested')
      throw storeInvariant('postgres', 'the cancel request', 'the statement answered an unknown outcome');
    const event = {
      id: valid.eventId,
      runId: valid.runId,
      seq: validateCounter(seq, 'seq'),
      type: 'run.cancel_requested' as const,
      payload: { reason: valid.reason },
      createdAtMs: validateEpochMs(nowMs, 'nowMs'),
    };
    return { kind, run: validateRunRecord(run), event };
  }

  /**
   * Every active runtime run of a project, up to PROJECT_CANCEL_LIMIT, in one statement and one
   * transaction (migration 0018, docs/decisions/0320): what requestCancellation writes for each run,
   * and a still-queued run ended `cancelled`, as the cluster's single cancel ends one. The caller
   * authorizes first (run.stop on the project).
   */
  async requestProjectCancellation(command: ProjectCancellationCommand): Promise<ProjectCancellationOutcome> {
    const valid = validateProjectCancellationCommand(command);
    const [row] = await inOneStatement<{ outcome: { requested: unknown; cancelledQueued: unknown; more: unknown } }>(
      this.#pool,
      'requestProjectCancellation',
      {
        name: undefined,
        text: RUN_SQL.cancelProjectCall,
        values: [valid.projectId, valid.reason, PROJECT_CANCEL_LIMIT],
      },
    );
    const outcome = row?.outcome;
    if (outcome === undefined || typeof outcome.more !== 'boolean')
      throw storeInvariant('postgres', 'the project cancel', 'the statement answered no outcome');
    return {
      requested: validateCounter(outcome.requested, 'requested'),
      cancelledQueued: validateCounter(outcome.cancelledQueued, 'cancelledQueued'),
      more: outcome.more,
    };
  }

  async markTerminal(command: MarkTerminalCommand): Promise<MarkTerminalOutcome> {
    const valid = validateMarkTerminalCommand(command);
    return inTransaction(this.#pool, 'markTerminal', async (tx) => {
      const run = await this.#lockRun(tx, valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'already_terminal', run: lockedRecord(run) };
      if (valid.attemptId !== undefined) {
        if ((await tx.rows(RUN_SQL.selectAttempt, [valid.runId, valid.attemptId])).length === 0)
          return { kind: 'attempt_missing' };
        await tx.rows(RUN_SQL.endAttempt, [valid.runId, valid.attemptId, valid.status, run.nowMs]);
      }
      await tx.rows(RUN_SQL.writeRunTerminal, [valid.runId, run.version, valid.status, run.nowMs]);
      const appended = await appendRunEvent(tx, run, {
        type: 'run.terminal',
        eventId: valid.eventId,
        payload: { status: valid.status },
      });
      return { kind: 'terminal', run: appended.run, event: appended.event };
    });
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const id = validateId(runId, 'runId');
    const [run] = await inTransaction(this.#pool, 'getRun', (tx) => tx.rows(RUN_SQL.selectRun, [id]));
    return run === undefined ? null : validateRunRecord(run);
  }

  async getAttempt(runId: string, attemptId: string): Promise<AttemptRecord | null> {
    const ids = [validateId(runId, 'runId'), validateId(attemptId, 'attemptId')];
    const [attempt] = await inTransaction(this.#pool, 'getAttempt', (tx) => tx.rows(RUN_SQL.selectAttempt, ids));
    return attempt === undefined ? null : validateAttemptRecord(attempt);
  }

  async getAttempts(
    refs: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }>,
  ): Promise<Array<AttemptRecord | null>> {
    const valid = validateAttemptRefs(refs);
    // One round trip (docs/decisions/0024): a single statement reads one snapshot on its own.
    const rows = (
      await readInOneStatement(this.#pool, 'getAttempts', {
        name: undefined,
        text: RUN_SQL.selectAttempts,
        values: [valid.map((ref) => ref.runId), valid.map((ref) => ref.attemptId)],
      })
    ).map((row) => validateAttemptRecord(row));
    return valid.map((ref) => rows.find((row) => row.runId === ref.runId && row.attemptId === ref.attemptId) ?? null);
  }

  async listEvents(
    runId: string,
    page: { readonly afterSeq?: number; readonly limit?: number } = {},
  ): Promise<RunEvent[]> {
    const id = validateId(runId, 'runId');
    const { afterSeq, limit } = validateEventPage(page);
    const rows = await inTransaction(this.#pool, 'listEvents', (tx) =>
      tx.rows(RUN_SQL.listEvents, [id, afterSeq, limit]),
    );
    return rows.map(validateRunEvent);
  }
}
