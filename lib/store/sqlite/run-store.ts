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
  validateRequestCancellationsCommand,
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
  validateAttemptRecord,
  validateRunRecord,
} from '../../contract/index';
import type { RunStore } from '../run-store';
import { boundaryOf, type SqliteBoundary, type WriteOptions } from './transaction';
import type { Clock } from './clock';
import type { SqliteDatabase } from './database';
import { appendRunEvent } from './run-events';
import { runEventOf, selectAttempt, selectHeldRun, selectRun, validatedRow } from './rows';
import type { PreparedStatements } from './prepared';

function isActive(run: RunRecord): boolean {
  return runIsActive(run.status);
}

export class SqliteRunStore implements RunStore {
  readonly #boundary: SqliteBoundary;
  readonly #statements: PreparedStatements;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock } = {}) {
    this.#boundary = boundaryOf(database, options.clock);
    this.#statements = this.#boundary.statements;
  }

  /** Runs `work` in one BEGIN IMMEDIATE transaction with the clock read under the lock. */
  #write<T>(operation: string, work: (nowMs: number) => T, options?: WriteOptions): T {
    return this.#boundary.write(operation, work, options);
  }

  #run(runId: string): RunRecord | undefined {
    return selectRun(this.#statements, runId);
  }

  async createRun(command: CreateRunCommand): Promise<CreateRunOutcome> {
    const valid = validateCreateRunCommand(command);
    return this.#write('createRun', (nowMs) => {
      const run = validatedRow(
        this.#statements.insertRun.get({
          runId: valid.runId,
          projectId: valid.projectId,
          owner: valid.owner ?? 'runtime',
          name: valid.name ?? null,
          nowMs,
        }),
        validateRunRecord,
      );
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
      const attempt = validateAttemptRecord(
        this.#statements.insertAttempt.get({
          runId: valid.runId,
          attemptId: valid.attemptId,
          deadlineAtMs: valid.timeoutMs === undefined ? null : nowMs + valid.timeoutMs,
          receiptTokenDigest: valid.receiptTokenDigest ?? null,
          runnerId: valid.runnerId ?? null,
          leftovers: valid.leftovers ?? null,
          nowMs,
        }),
      );
      this.#statements.markRunRunning.run({ runId: valid.runId, nowMs });
      this.#statements.insertPendingDispatch.run({ runId: valid.runId, nowMs });
      return { kind: 'created', attempt };
    });
  }

  async advanceAttempt(command: AdvanceAttemptCommand): Promise<AdvanceAttemptOutcome> {
    const valid = validateAdvanceAttemptCommand(command);
    // `running` with its handle is what `run` then reports as started: synced (docs/decisions/0010).
    return this.#write(
      'advanceAttempt',
      (nowMs) => {
        const attempt = validatedRow(
          this.#statements.advanceAttempt.get({
            runId: valid.runId,
            attemptId: valid.attemptId,
            from: valid.from,
            to: valid.to,
            pid: valid.pid ?? null,
            handle: valid.handle ?? null,
            nowMs,
          }),
          validateAttemptRecord,
        );
        return attempt === undefined ? { kind: 'stale' } : { kind: 'advanced', attempt };
      },
      { synced: valid.to === 'running' },
    );
  }

  async endAttempt(command: EndAttemptCommand): Promise<EndAttemptOutcome> {
    const valid = validateEndAttemptCommand(command);
    return this.#write('endAttempt', (nowMs) => {
      const attempt = validatedRow(this.#statements.endAttempt.get({ ...valid, nowMs }), validateAttemptRecord);
      return attempt === undefined ? { kind: 'stale' } : { kind: 'ended', attempt };
    });
  }

  async requestCancellation(command: RequestCancellationCommand): Promise<RequestCancellationOutcome> {
    const valid = validateRequestCancellationCommand(command);
    return this.#write('requestCancellation', (nowMs) => this.#cancelIntentLocked(valid, nowMs));
  }

  /**
   * A page of cancel intents in one synced transaction (docs/decisions/0370): each run gets what
   * requestCancellation writes (its own rule, event and outcome, in the commands' order), and the
   * page costs one fsync instead of one per run. All or nothing: a throw writes none of them.
   */
  async requestCancellations(commands: readonly RequestCancellationCommand[]): Promise<RequestCancellationOutcome[]> {
    const valid = validateRequestCancellationsCommand(commands);
    return this.#write('requestCancellations', (nowMs) =>
      valid.map((command) => this.#cancelIntentLocked(command, nowMs)),
    );
  }

  /** The cancel intent rule (design/execution §5), inside BEGIN IMMEDIATE: an existing intent is kept. */
  #cancelIntentLocked(valid: RequestCancellationCommand, nowMs: number): RequestCancellationOutcome {
    const run = this.#run(valid.runId);
    if (run === undefined) return { kind: 'run_missing' };
    if (!isActive(run)) return { kind: 'run_terminal' };
    if (run.cancelRequestedAtMs !== null) return { kind: 'already_requested', run };
    this.#statements.writeCancelIntent.run({ runId: valid.runId, version: run.version, reason: valid.reason, nowMs });
    const event = appendRunEvent(this.#statements, {
      runId: valid.runId,
      version: run.version,
      type: 'run.cancel_requested',
      eventId: valid.eventId,
      payload: { reason: valid.reason },
      nowMs,
    });
    this.#statements.insertPendingDispatch.run({ runId: valid.runId, nowMs });
    return { kind: 'requested', run: selectHeldRun(this.#statements, valid.runId, 'requestCancellation'), event };
  }

  async markTerminal(command: MarkTerminalCommand): Promise<MarkTerminalOutcome> {
    const valid = validateMarkTerminalCommand(command);
    return this.#write('markTerminal', (nowMs) => {
      const run = this.#run(valid.runId);
      if (run === undefined) return { kind: 'run_missing' };
      if (!isActive(run)) return { kind: 'already_terminal', run };
      if (valid.attemptId !== undefined) {
        if (this.#statements.selectAttempt.get(valid.runId, valid.attemptId) === undefined)
          return { kind: 'attempt_missing' };
        this.#statements.endAttempt.get({
          runId: valid.runId,
          attemptId: valid.attemptId,
          status: valid.status,
          nowMs,
        });
      }
      this.#statements.writeRunTerminal.run({ runId: valid.runId, version: run.version, status: valid.status, nowMs });
      const event = appendRunEvent(this.#statements, {
        runId: valid.runId,
        version: run.version,
        type: 'run.terminal',
        eventId: valid.eventId,
        payload: { status: valid.status },
        nowMs,
      });
      return { kind: 'terminal', run: selectHeldRun(this.#statements, valid.runId, 'markTerminal'), event };
    });
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const id = validateId(runId, 'runId');
    return this.#boundary.read('getRun', () => this.#run(id)) ?? null;
  }

  async getAttempt(runId: string, attemptId: string): Promise<AttemptRecord | null> {
    const ids = [validateId(runId, 'runId'), validateId(attemptId, 'attemptId')] as const;
    return this.#boundary.read('getAttempt', () => selectAttempt(this.#statements, ...ids)) ?? null;
  }

  async getAttempts(
    refs: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }>,
  ): Promise<Array<AttemptRecord | null>> {
    const valid = validateAttemptRefs(refs);
    return this.#boundary.read('getAttempts', () =>
      valid.map((ref) => selectAttempt(this.#statements, ref.runId, ref.attemptId) ?? null),
    );
  }

  async listEvents(
    runId: string,
    page: { readonly afterSeq?: number; readonly limit?: number } = {},
  ): Promise<RunEvent[]> {
    const id = validateId(runId, 'runId');
    const { afterSeq, limit } = validateEventPage(page);
    return this.#boundary.read('listEvents', () =>
      this.#statements.listEvents.all({ runId: id, afterSeq, limit }).map(runEventOf),
    );
  }
}
