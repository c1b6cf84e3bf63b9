// The cluster's PostgreSQL model (docs/decisions/0100): worker sessions, waiting jobs, and the
// run-dispatch lease that binds a run's attempt to one session under a fence that only grows. Every
// time is the database's; every write transaction locks Run → Attempt → Lease, the order of the
// dispatch repository (design/postgres §D7), so a tick and a cancellation claim never deadlock.
import { randomUUID } from 'node:crypto';

import type { Pool } from 'pg';

import { PidfenceError } from '../base/errors';
import {
  type AttemptExit,
  type CompletionCause,
  type RunTerminalStatus,
  validateId,
  validateLeaseDurationMs,
} from '../contract/index';
import type { PostgresExecutionStore } from '../store/postgres/execution-store';
import { appendRunEvent, type LockedRun } from '../store/postgres/run-events';
import { SQL } from '../store/postgres/statements';
import { inTransaction, type Tx } from '../store/postgres/transaction';
import { CLUSTER_SQL } from './statements';

/** Who is calling: the verified certificate subject and the session it registered. */
export interface WorkerCaller {
  readonly principal: string;
  readonly sessionId: string;
}

/** The lease a worker holds on one run's attempt. */
export interface LeaseRef {
  readonly runId: string;
  readonly attemptId: string;
  readonly fence: number;
}

export interface Assignment extends LeaseRef {
  /** The run's project: the worker journals the run under it (docs/decisions/0104). */
  readonly projectId: string;
  readonly argv: readonly string[];
  readonly expiresAtMs: number;
  readonly deadlineAtMs: number | null;
}

export type PullOutcome =
  | { readonly kind: 'assigned'; readonly assignment: Assignment }
  | { readonly kind: 'none' }
  | { readonly kind: 'session_closed' };

/**
 * The lease-control answers (the tick itself, before any cancellation wrapper): `stop_requested`
 * has scope `run` when the run carries cancel intent (stopAtMs = cancel_requested_at_ms) and scope
 * `attempt` when only the attempt's own deadline passed (a task timeout, stopAtMs = the deadline).
 */
export type LeaseTickAnswer =
  | { readonly kind: 'renewed'; readonly expiresAtMs: number }
  | { readonly kind: 'terminal' }
  | { readonly kind: 'stop_requested'; readonly scope: 'run' | 'attempt'; readonly stopAtMs: number; readonly expiresAtMs: number }
  | { readonly kind: 'lost'; readonly reason: 'session' | 'fence' | 'expired' };

export interface CompletionReport extends LeaseRef {
  readonly status: RunTerminalStatus;
  readonly cause: CompletionCause;
  readonly exit: AttemptExit | null;
}

export type CompletionOutcome = { readonly kind: 'completed' } | { readonly kind: 'already_terminal' } | { readonly kind: 'lost' };

interface LeaseRow extends LeaseRef {
  readonly sessionId: string;
  readonly expiresAtMs: number;
  readonly releasedAtMs: number | null;
}

const ACTIVE_ATTEMPT = new Set(['claimed', 'starting', 'running']);
const ACTIVE_RUN = new Set(['queued', 'running']);
export const REAP_PAGE = 16;

function newId(prefix: string): string {
  return `${prefix}-${randomUUID()}`;
}

function validateArgv(argv: unknown): readonly string[] {
  if (!Array.isArray(argv) || argv.length === 0 || argv.length > 256 || !argv.every((part) => typeof part === 'string' && part.length <= 4096)) {
    throw new PidfenceError('a cluster job needs argv: 1 to 256 strings of at most 4096 characters each (the command and its arguments).', 'ERR_PIDFENCE_CLUSTER_INVALID_JOB');
  }
  return argv as readonly string[];
}

function validateCaller(caller: WorkerCaller): WorkerCaller {
  if (typeof caller?.principal !== 'string' || caller.principal.length === 0 || caller.principal.length > 256) {
    throw new PidfenceError('a worker call needs the principal of its verified client certificate.', 'ERR_PIDFENCE_CLUSTER_PRINCIPAL');
  }
  return { principal: caller.principal, sessionId: validateId(caller.sessionId, 'sessionId') };
}

function validateLeaseRef(ref: LeaseRef): LeaseRef {
  if (!Number.isSafeInteger(ref?.fence) || ref.fence < 1) {
    throw new PidfenceError('fence must be the positive integer from the assignment.', 'ERR_PIDFENCE_CLUSTER_INVALID_FENCE');
  }
  return { runId: validateId(ref.runId, 'runId'), attemptId: validateId(ref.attemptId, 'attemptId'), fence: ref.fence };
}

export class ClusterLeaseStore {
  readonly #pool: Pool;
  readonly #executionStore: PostgresExecutionStore;
  readonly #leaseDurationMs: number;

  constructor(pool: Pool, executionStore: PostgresExecutionStore, options: { readonly leaseDurationMs: number }) {
    this.#pool = pool;
    this.#executionStore = executionStore;
    this.#leaseDurationMs = validateLeaseDurationMs(options.leaseDurationMs);
  }

  get leaseDurationMs(): number {
    return this.#leaseDurationMs;
  }

  async registerSession(principal: string): Promise<string> {
    const id = newId('wks');
    validateCaller({ principal, sessionId: id });
    await inTransaction(this.#pool, 'registerSession', (tx) => tx.rows(CLUSTER_SQL.insertSession, [id, principal]));
    return id;
  }

  async endSession(caller: WorkerCaller): Promise<boolean> {
    const { principal, sessionId } = validateCaller(caller);
    const rows = await inTransaction(this.#pool, 'endSession', (tx) => tx.rows(CLUSTER_SQL.endSession, [sessionId, principal]));
    return rows.length === 1;
  }

  /** A runtime run in `queued` with its job, in one transaction; `exists` changes nothing. */
  async enqueueJob(job: { readonly runId: string; readonly projectId: string; readonly argv: readonly string[]; readonly timeoutMs?: number }): Promise<'created' | 'exists'> {
    const runId = validateId(job.runId, 'runId');
    const projectId = validateId(job.projectId, 'projectId');
    const argv = validateArgv(job.argv);
    const timeoutMs = job.timeoutMs ?? null;
    if (timeoutMs !== null && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 86_400_000)) {
      throw new PidfenceError('timeoutMs must be an integer from 1 to 86400000.', 'ERR_PIDFENCE_CLUSTER_INVALID_JOB');
    }
    return inTransaction(this.#pool, 'enqueueJob', async (tx) => {
      const [run] = await tx.rows(SQL.insertRun, [runId, projectId, 'runtime']);
      if (run === undefined) return 'exists';
      await tx.rows(CLUSTER_SQL.insertJob, [runId, JSON.stringify(argv), timeoutMs]);
      return 'created';
    });
  }

  /**
   * Hands the oldest waiting job to this session: a new attempt (running, no PID or handle here)
   * under a fresh lease whose fence is one above any earlier grant on the run. Reaps a bounded page
   * of expired leases first, so a dead worker's run ends without a timer of its own.
   */
  async pull(caller: WorkerCaller): Promise<PullOutcome> {
    const valid = validateCaller(caller);
    await this.reapExpired();
    return inTransaction(this.#pool, 'pull', async (tx) => {
      if ((await tx.rows(CLUSTER_SQL.touchSession, [valid.sessionId, valid.principal])).length === 0) return { kind: 'session_closed' };
      const [job] = await tx.rows<{ runId: string; projectId: string; argv: string[]; timeoutMs: number | null }>(CLUSTER_SQL.lockWaitingJob, []);
      if (job === undefined) return { kind: 'none' };
      const [run] = await tx.rows<LockedRun>(SQL.lockRun, [job.runId]);
      if (run === undefined) return { kind: 'none' };
      const attemptId = newId('att');
      const deadlineAtMs = job.timeoutMs === null ? null : run.nowMs + job.timeoutMs;
      await tx.rows(SQL.insertAttempt, [job.runId, attemptId, deadlineAtMs, null, run.nowMs, null]);
      await tx.rows(CLUSTER_SQL.markAttemptRunning, [job.runId, attemptId, run.nowMs]);
      await tx.rows(SQL.markRunRunning, [job.runId, run.nowMs]);
      const [lease] = await tx.rows<LeaseRow>(CLUSTER_SQL.grantLease, [job.runId, attemptId, valid.sessionId, run.nowMs, this.#leaseDurationMs]);
      if (lease === undefined) throw new Error('lease grant returned no row');
      return { kind: 'assigned', assignment: { runId: job.runId, projectId: job.projectId, attemptId, fence: lease.fence, argv: job.argv, expiresAtMs: lease.expiresAtMs, deadlineAtMs } };
    });
  }

  /** The lease-control tick, undecorated: renewed, terminal, stop_requested or lost. */
  async tick(caller: WorkerCaller, ref: LeaseRef): Promise<LeaseTickAnswer> {
    const who = validateCaller(caller);
    const lease = validateLeaseRef(ref);
    return inTransaction(this.#pool, 'leaseTick', (tx) => this.#tickLocked(tx, who, lease));
  }

  async #tickLocked(tx: Tx, caller: WorkerCaller, ref: LeaseRef): Promise<LeaseTickAnswer> {
    const [run] = await tx.rows<LockedRun>(SQL.lockRun, [ref.runId]);
    const [attempt] = run === undefined ? [] : await tx.rows<{ status: string; deadlineAtMs: number | null }>(CLUSTER_SQL.lockAttemptFacts, [ref.runId, ref.attemptId]);
    const [lease] = await tx.rows<LeaseRow>(CLUSTER_SQL.lockLease, [ref.runId]);
    if ((await tx.rows(CLUSTER_SQL.touchSession, [caller.sessionId, caller.principal])).length === 0) return { kind: 'lost', reason: 'session' };
    if (run === undefined || attempt === undefined || lease === undefined) return { kind: 'lost', reason: 'fence' };
    if (lease.sessionId !== caller.sessionId || lease.attemptId !== ref.attemptId || Number(lease.fence) !== ref.fence) return { kind: 'lost', reason: 'fence' };
    const ended = !ACTIVE_ATTEMPT.has(attempt.status) || !ACTIVE_RUN.has(run.status);
    if (ended) {
      await tx.rows(CLUSTER_SQL.releaseLease, [ref.runId, run.nowMs, ref.fence]);
      return { kind: 'terminal' };
    }
    if (lease.releasedAtMs !== null || lease.expiresAtMs <= run.nowMs) return { kind: 'lost', reason: 'expired' };
    const [renewed] = await tx.rows<LeaseRow>(CLUSTER_SQL.renewLease, [ref.runId, run.nowMs, this.#leaseDurationMs, ref.fence]);
    const expiresAtMs = renewed?.expiresAtMs ?? lease.expiresAtMs;
    if (run.cancelRequestedAtMs !== null) return { kind: 'stop_requested', scope: 'run', stopAtMs: run.cancelRequestedAtMs, expiresAtMs };
    if (attempt.deadlineAtMs !== null && attempt.deadlineAtMs <= run.nowMs) return { kind: 'stop_requested', scope: 'attempt', stopAtMs: attempt.deadlineAtMs, expiresAtMs };
    return { kind: 'renewed', expiresAtMs };
  }

  /**
   * The worker's completion report: accepted only from the session holding this fence, then the
   * terminal CAS of the execution store (one run.terminal event) and the lease released.
   */
  async complete(caller: WorkerCaller, report: CompletionReport): Promise<CompletionOutcome> {
    const who = validateCaller(caller);
    const ref = validateLeaseRef(report);
    const [lease] = await inTransaction(this.#pool, 'completeCheck', (tx) => tx.rows<LeaseRow>(CLUSTER_SQL.selectLease, [ref.runId]));
    if (lease === undefined || lease.sessionId !== who.sessionId || lease.attemptId !== ref.attemptId || Number(lease.fence) !== ref.fence) return { kind: 'lost' };
    const outcome = await this.#executionStore.completeAttempt({
      runId: ref.runId, attemptId: ref.attemptId, status: report.status, cause: report.cause, exit: report.exit,
      attemptEventId: newId('aev'), runEventId: newId('evt'), journalReceipt: false,
    });
    await this.#release(ref);
    if (outcome.kind === 'missing') return { kind: 'lost' };
    return { kind: outcome.kind };
  }

  /**
   * A cancelled job that no worker pulled yet ends `cancelled` at once (nothing runs, nothing to
   * stop); a run that is already running is left to its worker's stop. `queued` is read under the
   * run lock, which a pull takes first as well, so the two never both win.
   */
  async cancelIfQueued(runId: string): Promise<boolean> {
    const id = validateId(runId, 'runId');
    return inTransaction(this.#pool, 'cancelIfQueued', async (tx) => {
      const [run] = await tx.rows<LockedRun>(SQL.lockRun, [id]);
      if (run === undefined || run.status !== 'queued' || run.cancelRequestedAtMs === null) return false;
      await tx.rows(SQL.writeRunTerminal, [id, run.version, 'cancelled', run.nowMs]);
      await appendRunEvent(tx, run, { type: 'run.terminal', eventId: newId('evt'), payload: { status: 'cancelled' } });
      return true;
    });
  }

  /**
   * Ends the attempts of expired, unreleased leases (a worker that stopped ticking): the run fails
   * with cause `lost`, and the lease is released. At most REAP_PAGE per call.
   */
  async reapExpired(): Promise<number> {
    const expired = await inTransaction(this.#pool, 'reapExpired', (tx) => tx.rows<LeaseRef>(CLUSTER_SQL.expiredLeases, [REAP_PAGE]));
    for (const lease of expired) {
      await this.#executionStore.completeAttempt({
        runId: lease.runId, attemptId: lease.attemptId, status: 'failed', cause: 'lost', exit: null,
        attemptEventId: newId('aev'), runEventId: newId('evt'), journalReceipt: false,
      });
      await this.#release({ ...lease, fence: Number(lease.fence) });
    }
    return expired.length;
  }

  async #release(ref: LeaseRef): Promise<void> {
    await inTransaction(this.#pool, 'releaseLease', async (tx) => {
      const [run] = await tx.rows<LockedRun>(SQL.lockRun, [ref.runId]);
      if (run !== undefined) await tx.rows(CLUSTER_SQL.releaseLease, [ref.runId, run.nowMs, ref.fence]);
    });
  }
}
