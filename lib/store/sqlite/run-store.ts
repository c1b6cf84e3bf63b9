// SqliteRunStore (design/architecture §5, design/dispatch §2.2 steps 1-2, design/execution §3): runs, attempts with their
// durable handle, durable cancel intent with its event, and terminal states, on better-sqlite3.
import {
  validateAdvanceAttemptCommand,
  validateCreateAttemptCommand,
  validateCreateRunCommand,
  validateEndAttemptCommand,
  validateEventPage,
  validateAttemptRefs,
  validateId,
  validateMarkTerminalCommand,
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
  type RequestCancellationCommand,
  type RequestCancellationOutcome,
  type RunEvent,
  type RunRecord,
  runIsActive,
} from '../../contract/index';
import type { RunStore } from '../run-store';
import type { Clock } from './clock';
import { runSqliteWrite } from './transaction';
import type { SqliteDatabase } from './database';
import { appendRunEvent } from './run-events';
import { prepareStatements, type PreparedStatements } from './statements';

function isActive(run: RunRecord): boolean {
  return runIsActive(run.status);
}

export class SqliteRunStore implements RunStore {
  readonly #database: SqliteDatabase;
  readonly #statements: PreparedStatements;
  readonly #clock: Clock;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock } = {}) {
    this.#database = database;
    this.#statements = prepareStatements(database);
    this.#clock = options.clock ?? Date.now;
  }

  /** Runs `work` in one BEGIN IMMEDIATE transaction with the clock read under the lock. */
  #write<T>(operation: string, work: (nowMs: number) => T): T {
    return runSqliteWrite(this.#database, this.#clock, operation, work);
  }

  #run(runId: string): RunRecord | undefined {
    return this.#statements.selectRun.get(runId) as RunRecord | undefined;
  }

  async createRun(command: CreateRunCommand): Promise<CreateRunOutcome> {
    const valid = validateCreateRunCommand(command);
    return this.#write('createRun', (nowMs) => {
      const run = this.#statements.insertRun.get({ runId: valid.runId, projectId: valid.projectId, owner: valid.owner ?? 'runtime', nowMs }) as RunRecord | undefined;
      return run === undefined ? { kind: 'exists' } : { kind: 'created', run };
    });
  }

  async createAttempt(command: CreateAttemptCommand): Promise<CreateAttemptOutcome> {
    const valid = validateCreateAttemptCommand(command);
    return this.#write('createAttempt', (nowMs) => {
      const run = this.#run(valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'run_terminal' };
      if (this.#statements.selectAttemptById.get(valid.attemptId) !== undefined) return { kind: 'exists' };
      if (this.#statements.selectActiveAttempt.get(valid.runId) !== undefined) return { kind: 'active_attempt_exists' };
      const attempt = this.#statements.insertAttempt.get({
        runId: valid.runId,
        attemptId: valid.attemptId,
        deadlineAtMs: valid.timeoutMs === undefined ? null : nowMs + valid.timeoutMs,
        receiptTokenDigest: valid.receiptTokenDigest ?? null,
        runnerId: valid.runnerId ?? null,
        nowMs,
      }) as AttemptRecord;
      this.#statements.markRunRunning.run({ runId: valid.runId, nowMs });
      this.#statements.insertPendingDispatch.run({ runId: valid.runId, nowMs });
      return { kind: 'created', attempt };
    });
  }

  async advanceAttempt(command: AdvanceAttemptCommand): Promise<AdvanceAttemptOutcome> {
    const valid = validateAdvanceAttemptCommand(command);
    return this.#write('advanceAttempt', (nowMs) => {
      const attempt = this.#statements.advanceAttempt.get({
        runId: valid.runId,
        attemptId: valid.attemptId,
        from: valid.from,
        to: valid.to,
        pid: valid.pid ?? null,
        handle: valid.handle ?? null,
        nowMs,
      }) as AttemptRecord | undefined;
      return attempt === undefined ? { kind: 'stale' } : { kind: 'advanced', attempt };
    });
  }

  async endAttempt(command: EndAttemptCommand): Promise<EndAttemptOutcome> {
    const valid = validateEndAttemptCommand(command);
    return this.#write('endAttempt', (nowMs) => {
      const attempt = this.#statements.endAttempt.get({ ...valid, nowMs }) as AttemptRecord | undefined;
      return attempt === undefined ? { kind: 'stale' } : { kind: 'ended', attempt };
    });
  }

  async requestCancellation(command: RequestCancellationCommand): Promise<RequestCancellationOutcome> {
    const valid = validateRequestCancellationCommand(command);
    return this.#write('requestCancellation', (nowMs) => {
      const run = this.#run(valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'run_terminal' };
      if (run.cancelRequestedAtMs !== null) return { kind: 'already_requested', run };
      this.#statements.writeCancelIntent.run({ runId: valid.runId, version: run.version, reason: valid.reason, nowMs });
      const event = appendRunEvent(this.#statements, {
        runId: valid.runId, version: run.version, type: 'run.cancel_requested', eventId: valid.eventId, payload: { reason: valid.reason }, nowMs,
      });
      this.#statements.insertPendingDispatch.run({ runId: valid.runId, nowMs });
      return { kind: 'requested', run: this.#run(valid.runId) as RunRecord, event };
    });
  }

  async markTerminal(command: MarkTerminalCommand): Promise<MarkTerminalOutcome> {
    const valid = validateMarkTerminalCommand(command);
    return this.#write('markTerminal', (nowMs) => {
      const run = this.#run(valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'already_terminal', run };
      if (valid.attemptId !== undefined) {
        if (this.#statements.selectAttempt.get(valid.runId, valid.attemptId) === undefined) return { kind: 'attempt_missing' };
        this.#statements.endAttempt.get({ runId: valid.runId, attemptId: valid.attemptId, status: valid.status, nowMs });
      }
      this.#statements.writeRunTerminal.run({ runId: valid.runId, version: run.version, status: valid.status, nowMs });
      const event = appendRunEvent(this.#statements, {
        runId: valid.runId, version: run.version, type: 'run.terminal', eventId: valid.eventId, payload: { status: valid.status }, nowMs,
      });
      return { kind: 'terminal', run: this.#run(valid.runId) as RunRecord, event };
    });
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    return this.#run(validateId(runId, 'runId')) ?? null;
  }

  async getAttempt(runId: string, attemptId: string): Promise<AttemptRecord | null> {
    const row = this.#statements.selectAttempt.get(validateId(runId, 'runId'), validateId(attemptId, 'attemptId'));
    return (row as AttemptRecord | undefined) ?? null;
  }

  async getAttempts(refs: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }>): Promise<Array<AttemptRecord | null>> {
    return validateAttemptRefs(refs).map((ref) => (this.#statements.selectAttempt.get(ref.runId, ref.attemptId) as AttemptRecord | undefined) ?? null);
  }

  async listEvents(runId: string, page: { readonly afterSeq?: number; readonly limit?: number } = {}): Promise<RunEvent[]> {
    const id = validateId(runId, 'runId');
    const { afterSeq, limit } = validateEventPage(page);
    const rows = this.#statements.listEvents.all({ runId: id, afterSeq, limit }) as Array<Omit<RunEvent, 'payload'> & { payload: string }>;
    return rows.map((row) => ({ ...row, payload: JSON.parse(row.payload) as unknown }));
  }
}
