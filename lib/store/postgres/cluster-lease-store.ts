// The cluster's PostgreSQL model (docs/decisions/0100): worker sessions, waiting jobs, and the
// run-dispatch lease that binds a run's attempt to one session under a fence that only grows. Every
// time is the database's; every write transaction locks Run → Attempt → Lease, the order of the
// dispatch repository (design/postgres §D7), so a tick and a cancellation claim never deadlock.
import { randomUUID } from 'node:crypto';

import type { Pool } from 'pg';

import { PidfenceError } from '../../base/errors';
import {
  type AttemptExit,
  type CompleteAttemptCommand,
  type CompletionCause,
  EXECUTION_PAGE_MAX,
  type RunTerminalStatus,
  validateCompleteAttemptCommand,
  validateId,
  validateRunName,
  validateLeaseDurationMs,
} from '../../contract/index';
import { CLUSTER_LEASE_SQL } from './cluster-lease-statements';
import type { PostgresExecutionStore } from './execution-store';
import { appendRunEvent, type LockedRun } from './run-events';
import { FLEET_SQL } from './fleet-statements';
import { RUN_SQL } from './run-statements';
import { inOneStatement, inTransaction, readInOneStatement, type Tx } from './transaction';

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
  /** Opt-in (docs/decisions/0273): the worker stops the job after this long without a renewal. */
  readonly stopAfterDisconnectMs: number | null;
}

export type PullPageOutcome =
  | { readonly kind: 'assigned'; readonly assignments: readonly Assignment[] }
  | { readonly kind: 'none' }
  | { readonly kind: 'session_closed' };

/** The most jobs one pull hands out. */
export const PULL_PAGE_MAX = 64;

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
  | {
      readonly kind: 'stop_requested';
      readonly scope: 'run' | 'attempt';
      readonly stopAtMs: number;
      readonly expiresAtMs: number;
    }
  /**
   * `forgotten`: an operator ran `pidfence worker forget` and the run ended without this worker
   * (docs/decisions/0271). `expired` now means only a lease released without the worker's report.
   */
  | { readonly kind: 'lost'; readonly reason: 'session' | 'fence' | 'expired' | 'forgotten' };

/** An open lease of a session that its worker's page did not name (docs/decisions/0434). */
export interface UnnamedLease {
  readonly runId: string;
  readonly attemptId: string;
  readonly fence: number;
  readonly projectId: string;
}

/** At most this many unnamed leases per look: a pull hands out at most this many at once. */
const UNNAMED_LEASES_MAX = 64;

/** The session's side of a lease page: `lapsed` renews nothing, `lost` is not this principal's open session. */
export interface LeaseTickPage {
  readonly session: 'live' | 'lapsed' | 'lost';
  readonly expiresAtMs: number;
  /** Only the leases whose answer is not a plain renewal. */
  readonly answers: ReadonlyMap<string, LeaseTickAnswer>;
}

interface SessionRow {
  readonly kind: LeaseTickPage['session'];
  readonly expiresAtMs: number | null;
}

/** The most leases one worker request carries (a worker's capacity is at most WORKER_CAPACITY_MAX). */
export const LEASE_PAGE_MAX = 1_024;

export interface CompletionReport extends LeaseRef {
  readonly status: RunTerminalStatus;
  readonly cause: CompletionCause;
  readonly exit: AttemptExit | null;
}

export type CompletionOutcome =
  { readonly kind: 'completed' } | { readonly kind: 'already_terminal' } | { readonly kind: 'lost' };

/** One entry of a completion page's answer: the single completion's outcome, or its refusal's code. */
export type CompletionPageAnswer =
  | { readonly runId: string; readonly kind: CompletionOutcome['kind'] }
  | { readonly runId: string; readonly kind: 'refused'; readonly code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' };

/** What a report is against its lease, the one rule of `complete` and `completePage`. */
type CompletionVerdict = 'accepted' | 'lost' | 'forgotten';

/** A validated report of a page and the execution store's command it becomes if accepted. */
interface PagedReport {
  readonly ref: LeaseRef;
  readonly command: CompleteAttemptCommand;
}

interface LeaseRow extends LeaseRef {
  readonly sessionId: string;
  readonly expiresAtMs: number;
  readonly releasedAtMs: number | null;
  readonly unreachableAtMs: number | null;
  readonly forgottenAtMs: number | null;
}

/** What `pidfence worker forget` did (docs/decisions/0271). */
export interface ForgetOutcome {
  readonly runsForgotten: number;
  readonly sessionsEnded: number;
}

/** A late report of a forgotten run (docs/decisions/0271): refused, nothing rewritten. */
export class WorkerForgottenError extends PidfenceError {
  constructor() {
    super(
      'an operator declared this worker gone (`pidfence worker forget`) and its run ended without it; this report is refused and changes nothing.',
      'ERR_PIDFENCE_WORKER_FORGOTTEN',
    );
  }
}

/** Forget ends at most this many runs per act; a retry continues (a worker holds its capacity). */
export const FORGET_RUNS_MAX = 1_024;

function holdsFence(lease: LeaseRow | undefined, ref: LeaseRef): lease is LeaseRow {
  return lease !== undefined && lease.attemptId === ref.attemptId && Number(lease.fence) === ref.fence;
}

const ACTIVE_RUN = new Set(['queued', 'running']);
export const REAP_PAGE = 16;
const REAP_INTERVAL_MS = 1_000;
/** A session not heard for this many leases is ended (docs/decisions/0270); its runs are unreachable by then. */
export const SESSION_IDLE_LEASES = 4;

function newId(prefix: string): string {
  return `${prefix}-${randomUUID()}`;
}

function validateArgv(argv: unknown): readonly string[] {
  if (
    !Array.isArray(argv) ||
    argv.length === 0 ||
    argv.length > 256 ||
    !argv.every((part) => typeof part === 'string' && part.length <= 4096)
  ) {
    throw new PidfenceError(
      'a cluster job needs argv: 1 to 256 strings of at most 4096 characters each (the command and its arguments).',
      'ERR_PIDFENCE_CLUSTER_INVALID_JOB',
    );
  }
  return argv as readonly string[];
}

function validateCaller(caller: WorkerCaller): WorkerCaller {
  if (typeof caller?.principal !== 'string' || caller.principal.length === 0 || caller.principal.length > 256) {
    throw new PidfenceError(
      'a worker call needs the principal of its verified client certificate.',
      'ERR_PIDFENCE_CLUSTER_PRINCIPAL',
    );
  }
  return { principal: caller.principal, sessionId: validateId(caller.sessionId, 'sessionId') };
}

function validateLeaseRef(ref: LeaseRef): LeaseRef {
  if (!Number.isSafeInteger(ref?.fence) || ref.fence < 1) {
    throw new PidfenceError(
      'fence must be the positive integer from the assignment.',
      'ERR_PIDFENCE_CLUSTER_INVALID_FENCE',
    );
  }
  return { runId: validateId(ref.runId, 'runId'), attemptId: validateId(ref.attemptId, 'attemptId'), fence: ref.fence };
}

/**
 * A report is taken from the session holding its fence only; a forgotten run's late report is
 * refused even from its holder (docs/decisions/0271), so the operator's record is kept.
 */
function completionVerdict(lease: LeaseRow | undefined, ref: LeaseRef, who: WorkerCaller): CompletionVerdict {
  if (holdsFence(lease, ref) && lease.forgottenAtMs !== null) return 'forgotten';
  if (lease === undefined || lease.sessionId !== who.sessionId || !holdsFence(lease, ref)) return 'lost';
  return 'accepted';
}

/** The terminal CAS of the execution store for a leased attempt: one run.terminal event, no receipt. */
function endCommand(
  ref: Pick<LeaseRef, 'runId' | 'attemptId'>,
  status: RunTerminalStatus,
  cause: CompletionCause,
  exit: AttemptExit | null,
): CompleteAttemptCommand {
  return {
    runId: ref.runId,
    attemptId: ref.attemptId,
    status,
    cause,
    exit,
    attemptEventId: newId('aev'),
    runEventId: newId('evt'),
    journalReceipt: false,
  };
}

/** A page's ends commit in one transaction of the execution store, whose page bounds it (docs/decisions/0432). */
function invalidCompletionPage(): PidfenceError {
  return new PidfenceError(
    `a completion page carries 1 to ${EXECUTION_PAGE_MAX} reports, each run named once; send the rest in the next page.`,
    'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST',
  );
}

/**
 * Every report of a page checked before anything is read or written (docs/decisions/0432): one bad
 * report refuses the page, typed. Exported for the control plane, which checks the page before its
 * session (a foreign session's page is answered `lost` without the store).
 */
export function validateCompletionPage(reports: readonly CompletionReport[]): PagedReport[] {
  if (!Array.isArray(reports) || reports.length === 0 || reports.length > EXECUTION_PAGE_MAX)
    throw invalidCompletionPage();
  const page = reports.map((report) => {
    const ref = validateLeaseRef(report);
    return { ref, command: validateCompleteAttemptCommand(endCommand(ref, report.status, report.cause, report.exit)) };
  });
  if (new Set(page.map(({ ref }) => ref.runId)).size !== page.length) throw invalidCompletionPage();
  return page;
}

function validateLeasePage(refs: readonly LeaseRef[]): LeaseRef[] {
  if (!Array.isArray(refs) || refs.length > LEASE_PAGE_MAX) {
    throw new PidfenceError(
      `a lease page carries at most ${LEASE_PAGE_MAX} leases, each named once.`,
      'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST',
    );
  }
  const leases = refs.map(validateLeaseRef);
  if (new Set(leases.map((l) => l.runId)).size !== leases.length) {
    throw new PidfenceError(
      `a lease page carries at most ${LEASE_PAGE_MAX} leases, each named once.`,
      'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST',
    );
  }
  return leases;
}

function leaseNotYours(): PidfenceError {
  return new PidfenceError(
    "no open lease of this worker name has that run, attempt and fence; the run was never this worker's, or it ended without it.",
    'ERR_PIDFENCE_CLUSTER_LEASE_NOT_YOURS',
  );
}

function sessionNotYours(): PidfenceError {
  return new PidfenceError(
    "that earlier session is not one of this worker name's; a worker settles only the sessions its own journal recorded.",
    'ERR_PIDFENCE_CLUSTER_SESSION_NOT_YOURS',
  );
}

function sessionClosed(then: 'attach' | 'settle'): PidfenceError {
  return new PidfenceError(`this session is closed; register a new one, then ${then}.`, 'ERR_PIDFENCE_CLUSTER_SESSION');
}

/** validateRunName's refusal as a PidfenceError, which the control plane answers 400 (docs/decisions/0251). */
function clusterRunName(value: string): string {
  try {
    return validateRunName(value);
  } catch (error) {
    throw new PidfenceError((error as Error).message, 'ERR_PIDFENCE_INVALID_RUN_NAME');
  }
}

export class ClusterLeaseStore {
  readonly #pool: Pool;
  readonly #executionStore: PostgresExecutionStore;
  readonly #leaseDurationMs: number;
  #lastReapMs = Number.NEGATIVE_INFINITY;

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
    await inTransaction(this.#pool, 'registerSession', (tx) =>
      tx.rows(CLUSTER_LEASE_SQL.insertSession, [id, principal, this.#leaseDurationMs]),
    );
    return id;
  }

  async endSession(caller: WorkerCaller): Promise<boolean> {
    const { principal, sessionId } = validateCaller(caller);
    const rows = await inTransaction(this.#pool, 'endSession', (tx) =>
      tx.rows(CLUSTER_LEASE_SQL.endSession, [sessionId, principal]),
    );
    return rows.length === 1;
  }

  /** A runtime run in `queued` with its job, in one transaction; `exists` changes nothing. */
  async enqueueJob(job: {
    readonly runId: string;
    readonly projectId: string;
    readonly argv: readonly string[];
    readonly timeoutMs?: number;
    readonly name?: string;
    readonly stopAfterDisconnectMs?: number;
  }): Promise<'created' | 'exists'> {
    const runId = validateId(job.runId, 'runId');
    const projectId = validateId(job.projectId, 'projectId');
    const name = job.name === undefined ? null : clusterRunName(job.name);
    const argv = validateArgv(job.argv);
    const timeoutMs = job.timeoutMs ?? null;
    if (timeoutMs !== null && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 86_400_000)) {
      throw new PidfenceError('timeoutMs must be an integer from 1 to 86400000.', 'ERR_PIDFENCE_CLUSTER_INVALID_JOB');
    }
    const stopAfter = job.stopAfterDisconnectMs ?? null;
    if (stopAfter !== null && (!Number.isSafeInteger(stopAfter) || stopAfter < 1_000 || stopAfter > 86_400_000)) {
      throw new PidfenceError(
        'stopAfterDisconnectMs must be an integer from 1000 (1 s) to 86400000 (1 day).',
        'ERR_PIDFENCE_CLUSTER_INVALID_JOB',
      );
    }
    return inTransaction(this.#pool, 'enqueueJob', async (tx) => {
      const [run] = await tx.rows(RUN_SQL.insertRun, [runId, projectId, 'runtime', name]);
      if (run === undefined) return 'exists';
      await tx.rows(CLUSTER_LEASE_SQL.insertJob, [runId, JSON.stringify(argv), timeoutMs, stopAfter]);
      return 'created';
    });
  }

  /**
   * Hands the oldest waiting job to this session: a new attempt (running, no PID or handle here)
   * under a fresh lease whose fence is one above any earlier grant on the run. It reaps nothing: the
   * reap has its own timer and the lease page's rate-limited turn (docs/decisions/0422).
   */
  async pull(caller: WorkerCaller, pullId?: string): Promise<PullOutcome> {
    const page = await this.pullPage(caller, 1, pullId);
    return page.kind === 'assigned' ? { kind: 'assigned', assignment: page.assignments[0] as Assignment } : page;
  }

  /**
   * Up to `max` waiting jobs for this session in one transaction (a worker's free slots,
   * docs/decisions/0200). A named pull is answered once (docs/decisions/0437): the same name again
   * (the replica set sending a timed-out pull to another replica) gets what the first granted and
   * still holds, and nothing new. The session's row is locked first, so a repeat that runs beside
   * the first waits for it and then reads its grants.
   */
  async pullPage(caller: WorkerCaller, max: number, pullId?: string): Promise<PullPageOutcome> {
    const valid = validateCaller(caller);
    if (!Number.isSafeInteger(max) || max < 1 || max > PULL_PAGE_MAX) {
      throw new PidfenceError(
        `a pull asks for 1 to ${PULL_PAGE_MAX} jobs (the worker's free slots).`,
        'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST',
      );
    }
    const name = pullId === undefined ? null : validateId(pullId, 'pullId');
    return inTransaction(this.#pool, 'pull', async (tx) => {
      if (!(await this.#touchSession(tx, valid))) return { kind: 'session_closed' };
      const assignments: Assignment[] = name === null ? [] : await this.#grantsOfPull(tx, valid.sessionId, name);
      if (assignments.length > 0) return { kind: 'assigned', assignments };
      while (assignments.length < max) {
        const assignment = await this.#grantOne(tx, valid.sessionId, name);
        if (assignment === null) break;
        assignments.push(assignment);
      }
      return assignments.length === 0 ? { kind: 'none' } : { kind: 'assigned', assignments };
    });
  }

  /** What an earlier answer of this named pull granted, as it granted it. */
  #grantsOfPull(tx: Tx, sessionId: string, pullId: string): Promise<Assignment[]> {
    return tx.rows<Assignment>(CLUSTER_LEASE_SQL.grantsOfPull, [sessionId, pullId]);
  }

  async #grantOne(tx: Tx, sessionId: string, pullId: string | null): Promise<Assignment | null> {
    const [job] = await tx.rows<{
      runId: string;
      projectId: string;
      argv: string[];
      timeoutMs: number | null;
      stopAfterDisconnectMs: number | null;
    }>(CLUSTER_LEASE_SQL.lockWaitingJob, []);
    if (job === undefined) return null;
    const [run] = await tx.rows<LockedRun>(RUN_SQL.lockRun, [job.runId]);
    if (run === undefined) return null;
    const attemptId = newId('att');
    const deadlineAtMs = job.timeoutMs === null ? null : run.nowMs + job.timeoutMs;
    // A worker launches with leftovers stopped (the default, not stated: NULL; docs/decisions/0302).
    await tx.rows(RUN_SQL.insertAttempt, [job.runId, attemptId, deadlineAtMs, null, run.nowMs, null, null]);
    await tx.rows(CLUSTER_LEASE_SQL.markAttemptRunning, [job.runId, attemptId, run.nowMs]);
    await tx.rows(RUN_SQL.markRunRunning, [job.runId, run.nowMs]);
    const [lease] = await tx.rows<LeaseRow>(CLUSTER_LEASE_SQL.grantLease, [
      job.runId,
      attemptId,
      sessionId,
      run.nowMs,
      this.#leaseDurationMs,
      pullId,
    ]);
    if (lease === undefined) throw new Error('lease grant returned no row');
    return {
      runId: job.runId,
      projectId: job.projectId,
      attemptId,
      fence: lease.fence,
      argv: job.argv,
      expiresAtMs: lease.expiresAtMs,
      deadlineAtMs,
      stopAfterDisconnectMs: job.stopAfterDisconnectMs === null ? null : Number(job.stopAfterDisconnectMs),
    };
  }

  /** The lease-control tick of one lease, undecorated: a page of one (one rule, docs/decisions/0200). */
  async tick(caller: WorkerCaller, ref: LeaseRef): Promise<LeaseTickAnswer> {
    const page = await this.tickPage(caller, [ref]);
    return page.answers.get(ref.runId) ?? { kind: 'renewed', expiresAtMs: page.expiresAtMs };
  }

  /**
   * Every lease a worker holds in one statement (docs/decisions/0200): the session is touched once,
   * and `answers` holds only the leases whose answer is not a plain renewal; each of the others is
   * renewed until `expiresAtMs`, the session's new heartbeat expiry.
   */
  async tickPage(caller: WorkerCaller, refs: readonly LeaseRef[]): Promise<LeaseTickPage> {
    const who = validateCaller(caller);
    const leases = validateLeasePage(refs);
    const rows = await inOneStatement<{ runId: string | null; answer: SessionRow | LeaseTickAnswer }>(
      this.#pool,
      'leaseTick',
      {
        name: 'pidfence_leaseTick_v1',
        text: CLUSTER_LEASE_SQL.leaseTick,
        values: [
          who.sessionId,
          who.principal,
          leases.map((l) => l.runId),
          leases.map((l) => l.attemptId),
          leases.map((l) => l.fence),
          this.#leaseDurationMs,
        ],
      },
    );
    const session = rows.find((row) => row.runId === null)?.answer as SessionRow | undefined;
    if (session === undefined) throw new Error('lease tick returned no session row');
    const answers = new Map<string, LeaseTickAnswer>();
    for (const row of rows) if (row.runId !== null) answers.set(row.runId, row.answer as LeaseTickAnswer);
    await this.#clearMarks(leases, answers);
    return { session: session.kind, expiresAtMs: Number(session.expiresAtMs ?? 0), answers };
  }

  /**
   * A renewal by the fence holder clears the reap's unreachable mark (docs/decisions/0270, 0275):
   * the page's statement names those leases (`reattach`); each gets its `run.reattached` event once.
   */
  async #clearMarks(leases: readonly LeaseRef[], answers: Map<string, LeaseTickAnswer>): Promise<void> {
    for (const lease of leases) {
      const answer = answers.get(lease.runId) as (LeaseTickAnswer & { reattach?: boolean }) | undefined;
      if (answer?.reattach === undefined) continue;
      const { reattach, ...plain } = answer;
      if (plain.kind === 'renewed') answers.delete(lease.runId);
      else answers.set(lease.runId, plain as LeaseTickAnswer);
      if (reattach !== true) continue;
      await inTransaction(this.#pool, 'clearUnreachable', async (tx) => {
        const [run] = await tx.rows<LockedRun>(RUN_SQL.lockRun, [lease.runId]);
        if (run === undefined) return;
        const cleared = await tx.rows(CLUSTER_LEASE_SQL.clearUnreachable, [lease.runId, lease.fence]);
        if (cleared.length > 0)
          await appendRunEvent(tx, run, {
            type: 'run.reattached',
            eventId: newId('evt'),
            payload: { attemptId: lease.attemptId },
          });
      });
    }
  }

  /**
   * A restarted worker's new session takes over a lease an earlier session of the same name holds
   * (docs/decisions/0272): same run, attempt and fence, so no stale holder can come back with it. A
   * lease of another name, a released or forgotten one, or a closed session is refused, typed.
   */
  async attach(caller: WorkerCaller, ref: LeaseRef): Promise<'attached' | 'already'> {
    const who = validateCaller(caller);
    const lease = validateLeaseRef(ref);
    return inTransaction(this.#pool, 'leaseAttach', async (tx) => {
      const [run] = await tx.rows<LockedRun>(RUN_SQL.lockRun, [lease.runId]);
      const [row] = run === undefined ? [] : await tx.rows<LeaseRow>(CLUSTER_LEASE_SQL.lockLease, [lease.runId]);
      if (run === undefined || !holdsFence(row, lease)) throw leaseNotYours();
      if (row.forgottenAtMs !== null) throw new WorkerForgottenError();
      if (row.releasedAtMs !== null) throw leaseNotYours();
      if (!(await this.#touchSession(tx, who))) throw sessionClosed('attach');
      if (row.sessionId === who.sessionId) return 'already';
      const [holder] = await tx.rows<{ principal: string }>(CLUSTER_LEASE_SQL.sessionPrincipal, [row.sessionId]);
      if (holder?.principal !== who.principal) throw leaseNotYours();
      await tx.rows(CLUSTER_LEASE_SQL.rebindLease, [
        lease.runId,
        who.sessionId,
        run.nowMs,
        this.#leaseDurationMs,
        lease.fence,
      ]);
      await appendRunEvent(tx, run, {
        type: 'run.reattached',
        eventId: newId('evt'),
        payload: { attemptId: lease.attemptId },
      });
      return 'attached';
    });
  }

  /**
   * A restarted worker settles an earlier session of its own journal (docs/decisions/0360): it proved
   * the process that pulled under it gone and re-attached every lease its journal names, so each lease
   * that session still holds was never journaled, and a worker admits nothing it did not journal
   * first: its run never started. The session ends (no pull can grant to it after), and each such run
   * ends `failed` with cause `never_started` (or as its cancel intent says: the CAS decides under the
   * run lock, docs/decisions/0440), its lease released. Another name's session is refused; a retry
   * finishes what a first call left.
   */
  async settleEarlierSession(caller: WorkerCaller, earlierSessionId: string): Promise<{ neverStarted: number }> {
    const who = validateCaller(caller);
    const earlier = validateId(earlierSessionId, 'sessionId');
    if (earlier === who.sessionId) throw sessionNotYours();
    const open = await inTransaction(this.#pool, 'settleEarlierSession', async (tx) => {
      if (!(await this.#touchSession(tx, who))) throw sessionClosed('settle');
      const [holder] = await tx.rows<{ principal: string }>(CLUSTER_LEASE_SQL.endEarlierSession, [
        earlier,
        who.principal,
      ]);
      if (holder?.principal !== who.principal) throw sessionNotYours();
      return tx.rows<LeaseRef>(CLUSTER_LEASE_SQL.openLeasesOfSession, [earlier, FORGET_RUNS_MAX]);
    });
    let neverStarted = 0;
    for (const lease of open) {
      const ref = { runId: lease.runId, attemptId: lease.attemptId, fence: Number(lease.fence) };
      const outcome = await this.#endAttempt(ref, 'failed', 'never_started', null);
      await this.#release(ref);
      if (outcome.kind === 'completed') neverStarted += 1;
    }
    return { neverStarted };
  }

  /**
   * The worker's completion report: accepted only from the session holding this fence, then the
   * terminal CAS of the execution store (one run.terminal event) and the lease released.
   */
  async complete(caller: WorkerCaller, report: CompletionReport): Promise<CompletionOutcome> {
    const who = validateCaller(caller);
    const ref = validateLeaseRef(report);
    const [lease] = await inTransaction(this.#pool, 'completeCheck', (tx) =>
      tx.rows<LeaseRow>(CLUSTER_LEASE_SQL.selectLease, [ref.runId]),
    );
    const verdict = completionVerdict(lease, ref, who);
    // A forgotten run's late report: refused, typed, and the record the operator's act wrote is kept.
    if (verdict === 'forgotten') throw new WorkerForgottenError();
    if (verdict === 'lost') return { kind: 'lost' };
    const outcome = await this.#endAttempt(ref, report.status, report.cause, report.exit);
    await this.#release(ref);
    if (outcome.kind === 'missing') return { kind: 'lost' };
    return { kind: outcome.kind };
  }

  /**
   * A page of a worker's completion reports (docs/decisions/0432), each answered as `complete`
   * answers it alone, in request order; a forgotten run's refusal is that entry's answer only. One
   * read of the page's leases, the accepted ends in one transaction of the execution store (each the
   * single CAS, one run.terminal event), then their leases released in one statement.
   */
  async completePage(caller: WorkerCaller, reports: readonly CompletionReport[]): Promise<CompletionPageAnswer[]> {
    const who = validateCaller(caller);
    const page = validateCompletionPage(reports);
    const leases = await this.#leasesOf(page.map(({ ref }) => ref.runId));
    const verdicts = page.map(({ ref }) => completionVerdict(leases.get(ref.runId), ref, who));
    const accepted = page.filter((_, i) => verdicts[i] === 'accepted');
    const ends = new Map<string, CompletionOutcome['kind']>();
    if (accepted.length > 0) {
      const outcomes = await this.#executionStore.completeAttempts(accepted.map(({ command }) => command));
      accepted.forEach(({ ref }, i) => {
        const kind = (outcomes[i] as (typeof outcomes)[number]).kind;
        ends.set(ref.runId, kind === 'missing' ? 'lost' : kind);
      });
      await this.#releaseAll(accepted.map(({ ref }) => ref));
    }
    return page.map(({ ref }, i): CompletionPageAnswer => {
      const { runId } = ref;
      if (verdicts[i] === 'forgotten') return { runId, kind: 'refused', code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' };
      return { runId, kind: ends.get(runId) ?? 'lost' };
    });
  }

  /**
   * The open leases this live session holds that its page did not name (docs/decisions/0434): a
   * pull whose answer never reached the worker (its request timed out, or was sent again to another
   * replica) left them, and no page would ever name them. At most LEASE_PAGE_MAX, in run-id order.
   */
  async unnamedLeases(caller: WorkerCaller, named: readonly LeaseRef[]): Promise<UnnamedLease[]> {
    const who = validateCaller(caller);
    const refs = validateLeasePage(named);
    const rows = await readInOneStatement<UnnamedLease>(this.#pool, 'unnamedLeases', {
      name: 'pidfence_unnamedLeases_v1',
      text: CLUSTER_LEASE_SQL.unnamedLeasesOfSession,
      values: [who.sessionId, who.principal, refs.map((ref) => ref.runId), UNNAMED_LEASES_MAX],
    });
    return rows.map((row) => ({ ...row, fence: Number(row.fence) }));
  }

  /**
   * A cancelled job that no worker pulled yet ends `cancelled` at once (nothing runs, nothing to
   * stop); a run that is already running is left to its worker's stop. One call of the project
   * cancel's rule for a page of one (docs/decisions/0340): `queued` is read under the run lock, which
   * a pull takes first as well, so the two never both win.
   */
  async cancelIfQueued(runId: string): Promise<boolean> {
    const id = validateId(runId, 'runId');
    const [row] = await inTransaction(this.#pool, 'cancelIfQueued', (tx) =>
      tx.rows<{ ended: number }>(CLUSTER_LEASE_SQL.endQueuedCancel, [id]),
    );
    return row?.ended === 1;
  }

  /**
   * Marks expired, unreleased leases unreachable (docs/decisions/0270): a worker that stopped renewing
   * is not a dead job. The run and its attempt stay active, a cancel is still taken, and each run gets
   * one `run.unreachable` event. Sessions silent for SESSION_IDLE_LEASES leases end. At most REAP_PAGE
   * of each per call; the control plane calls it on a timer.
   */
  async reapExpired(): Promise<number> {
    const expired = await readInOneStatement<LeaseRef>(this.#pool, 'reapExpired', {
      name: 'pidfence_expiredLeases_v2',
      text: CLUSTER_LEASE_SQL.expiredLeases,
      values: [REAP_PAGE],
    });
    await inTransaction(this.#pool, 'expireSessions', (tx) =>
      tx.rows(CLUSTER_LEASE_SQL.expireSessions, [SESSION_IDLE_LEASES * this.#leaseDurationMs, REAP_PAGE]),
    );
    let marked = 0;
    for (const lease of expired) {
      marked += await inTransaction(this.#pool, 'markUnreachable', async (tx) => {
        const [run] = await tx.rows<LockedRun>(RUN_SQL.lockRun, [lease.runId]);
        if (run === undefined || !ACTIVE_RUN.has(run.status)) return 0;
        const written = await tx.rows(CLUSTER_LEASE_SQL.markUnreachable, [lease.runId, run.nowMs, Number(lease.fence)]);
        if (written.length === 0) return 0;
        await appendRunEvent(tx, run, {
          type: 'run.unreachable',
          eventId: newId('evt'),
          payload: { attemptId: lease.attemptId },
        });
        return 1;
      });
    }
    return marked;
  }

  /**
   * `pidfence worker forget NAME` (docs/decisions/0271): the operator declares the host gone. Its
   * sessions end, each run its sessions hold ends `failed` with cause `forgotten`, the lease keeps
   * the mark that refuses a late report, and one audit row says who did it. A retry finishes a forget
   * that stopped half-way; a forget with nothing to end is recorded `unchanged`.
   */
  async forgetWorker(name: string, actor: string): Promise<ForgetOutcome | null> {
    const forgotten = await inTransaction(this.#pool, 'forgetWorker', async (tx) => {
      const [known] = await tx.rows<{ known: boolean }>(FLEET_SQL.known, [name]);
      if (known?.known !== true) return null;
      await tx.rows(CLUSTER_LEASE_SQL.ensureWorkerRow, [name]);
      const [worker] = await tx.rows<{ nowMs: number }>(CLUSTER_LEASE_SQL.lockWorkerRow, [name]);
      const nowMs = Number(worker?.nowMs);
      const open = await tx.rows<LeaseRef>(CLUSTER_LEASE_SQL.leasesOfWorker, [name, FORGET_RUNS_MAX]);
      for (const lease of open) await tx.rows(CLUSTER_LEASE_SQL.forgetLease, [lease.runId, nowMs, Number(lease.fence)]);
      const ended = await tx.rows(CLUSTER_LEASE_SQL.endSessionsOf, [name, nowMs]);
      const outcome = open.length + ended.length > 0 ? 'changed' : 'unchanged';
      await tx.rows(CLUSTER_LEASE_SQL.insertForgetAudit, [newId('wau'), name, actor, outcome, nowMs]);
      return { leases: open, sessionsEnded: ended.length };
    });
    if (forgotten === null) return null;
    const { leases, sessionsEnded } = forgotten;
    let runsForgotten = 0;
    for (const lease of leases) {
      const outcome = await this.#endAttempt(lease, 'failed', 'forgotten', null);
      if (outcome.kind === 'completed') runsForgotten += 1;
    }
    return { runsForgotten, sessionsEnded };
  }

  /** Since when each of these runs is unreachable (database time); runs not marked are absent. */
  async unreachableSince(runIds: readonly string[]): Promise<ReadonlyMap<string, number>> {
    if (runIds.length === 0) return new Map();
    const rows = await inTransaction(this.#pool, 'unreachableOf', (tx) =>
      tx.rows<{ runId: string; sinceMs: string }>(CLUSTER_LEASE_SQL.unreachableOf, [runIds]),
    );
    return new Map(rows.map((row) => [row.runId, Number(row.sinceMs)]));
  }

  /** The status card's count of a project's unreachable runs. */
  async unreachableInProject(projectId: string): Promise<number> {
    const [row] = await inTransaction(this.#pool, 'unreachableInProject', (tx) =>
      tx.rows<{ count: number }>(CLUSTER_LEASE_SQL.unreachableInProject, [validateId(projectId, 'projectId')]),
    );
    return Number(row?.count ?? 0);
  }

  /**
   * The reap on any worker's lease page, at most once per REAP_INTERVAL_MS on this replica
   * (docs/decisions/0200): lapsed sessions' runs end whether or not some worker pulls.
   */
  async reapIfDue(): Promise<number> {
    const now = performance.now();
    if (now - this.#lastReapMs < REAP_INTERVAL_MS) return 0;
    this.#lastReapMs = now;
    return this.reapExpired();
  }

  /** This session's row, extended by one lease; false when it is not this principal's open session. */
  async #touchSession(tx: Tx, who: WorkerCaller): Promise<boolean> {
    const rows = await tx.rows(CLUSTER_LEASE_SQL.touchSession, [who.sessionId, who.principal, this.#leaseDurationMs]);
    return rows.length > 0;
  }

  /** The terminal CAS of the execution store for a leased attempt (one run.terminal event), no receipt. */
  #endAttempt(
    ref: Pick<LeaseRef, 'runId' | 'attemptId'>,
    status: RunTerminalStatus,
    cause: CompletionCause,
    exit: AttemptExit | null,
  ): ReturnType<PostgresExecutionStore['completeAttempt']> {
    return this.#executionStore.completeAttempt(endCommand(ref, status, cause, exit));
  }

  /** The leases of these runs in one read; a run without one is absent. */
  async #leasesOf(runIds: readonly string[]): Promise<ReadonlyMap<string, LeaseRow>> {
    const rows = await readInOneStatement<LeaseRow>(this.#pool, 'completionLeases', {
      name: 'pidfence_leasesOfRuns_v1',
      text: CLUSTER_LEASE_SQL.selectLeases,
      values: [runIds],
    });
    return new Map(rows.map((row) => [row.runId, row]));
  }

  /** Each lease released at its fence in one statement, its Run locked first (in run-id order), as `#release` does. */
  async #releaseAll(refs: readonly LeaseRef[]): Promise<void> {
    await inTransaction(this.#pool, 'releaseLeases', (tx) =>
      tx.rows(CLUSTER_LEASE_SQL.releaseLeases, [refs.map((ref) => ref.runId), refs.map((ref) => ref.fence)]),
    );
  }

  async #release(ref: LeaseRef): Promise<void> {
    await inTransaction(this.#pool, 'releaseLease', async (tx) => {
      const [run] = await tx.rows<LockedRun>(RUN_SQL.lockRun, [ref.runId]);
      if (run !== undefined) await tx.rows(CLUSTER_LEASE_SQL.releaseLease, [ref.runId, run.nowMs, ref.fence]);
    });
  }
}
