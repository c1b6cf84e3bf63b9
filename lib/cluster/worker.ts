// The remote worker (docs/decisions/0103; design/cluster): registers a session with the control plane,
// pulls jobs, runs each locally with the execution lifecycle on its own SQLite journal, ticks lease
// control at its cadence and reports completions. Its leases are journaled beside its SQLite journal,
// so a restarted worker re-attaches its runs and reports what ended while it was down (docs/decisions/
// 0272), and settles the runs its dead predecessor was handed but never journaled (0360); an outage
// never stops a job unless the job opted in (docs/decisions/0273). A stop from the control plane
// becomes local durable cancel intent, so the local lifecycle stops the job through its verified
// controller with its own durable handle; no PID, handle or command leaves this process.
import { randomUUID } from 'node:crypto';
import path from 'node:path';

import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { packageVersion } from '../base/package-version';
import { secondsText } from '../base/time';
import { runIsActive, type RunTerminalStatus } from '../contract/index';
import {
  createExecution,
  runnerGoneProof,
  validateJobNice,
  type CompletionOutcome,
  type ExecutionApplication,
  type RunnerSelf,
} from '../execution/index';
import { openSqliteStore } from '../store/sqlite/index';
import type { ClientTls } from './client';
import { ReplicaSet } from './replica-set';
import { LeaseJournal } from './lease-journal';
import { WorkerCycle } from './worker-cycle';

type SqliteStores = ReturnType<typeof openSqliteStore>;

export interface WorkerOptions {
  readonly controlPlaneUrls: readonly string[];
  readonly tls: ClientTls;
  /** The worker's local SQLite journal; receipts and the jobs' logs live beside it. */
  readonly journalFile: string;
  /** Jobs run at once (default 4). */
  readonly capacity?: number;
  /**
   * The lease-control cadence (default 1 s). It must be below half the control plane's worker lease:
   * startWorker refuses it otherwise, before it registers a session (docs/decisions/0430).
   */
  readonly tickMs?: number;
  readonly graceMs?: number;
  /** How much nicer than the worker its jobs run (docs/decisions/0441); default 0, the worker's priority. */
  readonly jobNice?: number;
  /** The version it announces to the control plane (default: this package's). */
  readonly version?: string;
  /** Fixed-state observations (tick answers, failures by code); never ids or commands. */
  readonly observe?: (event: { readonly what: string; readonly code?: string }) => void;
}

export interface Worker {
  readonly sessionId: string;
  /** Runs held now. */
  held(): number;
  /**
   * The control plane refused this worker's name or certificate as revoked (docs/decisions/0240): it
   * pulls no more work; the jobs it runs keep running and their completions stay queued.
   */
  revoked(): boolean;
  /** New certificate, key, CA or CRL for the next connections (docs/decisions/0242); bad material keeps the old. */
  reloadTls(tls: ClientTls): void;
  /** Stops pulling, drains the local lifecycle (stopping what still runs), ends the session. */
  close(): Promise<void>;
}

export function reportOf(outcome: CompletionOutcome): {
  status: RunTerminalStatus;
  cause: 'receipt' | 'never_started' | 'stopped' | 'lost';
  exit: { exitCode: number | null; signal: string | null } | null;
} | null {
  if (outcome.kind === 'completed' && outcome.cause !== 'forgotten')
    return {
      status: outcome.status,
      cause: outcome.cause,
      exit: { exitCode: outcome.exitCode, signal: outcome.signal },
    };
  if (outcome.kind === 'terminal') return { status: outcome.status, cause: 'stopped', exit: null };
  return null;
}

/** A refusal of this worker's name (deny list) or of its certificate (CRL). */
export function isRevocation(reply: { status: number; body: unknown }): boolean {
  const code = (reply.body as { code?: unknown } | null)?.code;
  return (
    reply.status === 403 && (code === 'ERR_PIDFENCE_WORKER_REVOKED' || code === 'ERR_PIDFENCE_CLUSTER_CERT_REVOKED')
  );
}

const NEVER_STARTED: Report = { status: 'failed', cause: 'never_started', exit: null };

/** The attempt the local run ended with, from its `run.terminal` event; null when it has none. */
async function terminalAttemptOf(local: SqliteStores, runId: string): Promise<string | null> {
  const events = await local.runStore.listEvents(runId, { limit: 256 });
  const attemptId = (events.find((event) => event.type === 'run.terminal')?.payload as { attemptId?: unknown })
    ?.attemptId;
  return typeof attemptId === 'string' ? attemptId : null;
}

/**
 * The end of a run the local journal already holds (it ended while the worker was down, or in this
 * start's recovery, which reports to nobody): its attempt.terminal facts. A lease journaled before
 * admission answered has no local attempt id: the run's own terminal event names it. Called at
 * start-up, before this process admits anything (docs/decisions/0361).
 */
async function journaledReport(
  local: SqliteStores,
  runId: string,
  journaledAttemptId: string | null,
): Promise<Report | null> {
  const run = await local.runStore.getRun(runId);
  if (run === null) return NEVER_STARTED;
  // Admission commits the run, then its attempt: a process that died between left a run nothing can start.
  if (run.status === 'queued' && (await local.runnerStore.activeAttemptOwner(runId)) === null) {
    await local.runStore.markTerminal({ runId, status: 'failed', eventId: `evt-${randomUUID()}` });
    return NEVER_STARTED;
  }
  if (runIsActive(run.status)) return null;
  const localAttemptId = journaledAttemptId ?? (await terminalAttemptOf(local, runId));
  const events = localAttemptId === null ? [] : await local.executionStore.listAttemptEvents(runId, localAttemptId);
  const payload = events.find((event) => event.type === 'attempt.terminal')?.payload as
    { cause?: string; exitCode?: number | null; signal?: string | null } | undefined;
  const cause =
    payload?.cause === 'receipt' || payload?.cause === 'never_started' || payload?.cause === 'lost'
      ? payload.cause
      : 'stopped';
  return {
    status: run.status as RunTerminalStatus,
    cause,
    exit: payload === undefined ? null : { exitCode: payload.exitCode ?? null, signal: payload.signal ?? null },
  };
}

type Observe = (what: string, code?: string) => void;

function observerOf(options: WorkerOptions): Observe {
  return (what, code) => {
    try {
      options.observe?.(code === undefined ? { what } : { what, code });
    } catch {
      // observation only
    }
  };
}

/** The replicas with the revocation watch: a 403 for this name or certificate marks the worker revoked once. */
function connect(options: WorkerOptions, observe: Observe) {
  const replicas = new ReplicaSet(options.controlPlaneUrls, options.tls);
  const state = { revoked: false };
  const send = async <T>(path: string, body: unknown, timeoutMs?: number): Promise<{ status: number; body: T }> => {
    const reply = await replicas.post<T>(path, body, timeoutMs);
    if (isRevocation(reply) && !state.revoked) {
      state.revoked = true;
      observe('revoked', (reply.body as { code: string }).code);
    }
    return reply;
  };
  return { replicas, state, send };
}

type Send = ReturnType<typeof connect>['send'];

/** The default lease-control cadence. */
export const WORKER_TICK_DEFAULT_MS = 1_000;

/**
 * A worker lease holds this many ticks: a session renewed by each page survives one page lost (a
 * replica that failed, a page that timed out) only when two ticks fit in the lease (docs/decisions/0430).
 */
export const TICKS_PER_WORKER_LEASE = 2;

/** Refuses a tick that is not below half the worker lease; the sentence says what to give instead. */
export function validateTickForLease(tickMs: number, leaseMs: number): void {
  if (tickMs * TICKS_PER_WORKER_LEASE < leaseMs) return;
  throw new PidfenceRangeError(
    `the worker's tick (--tick ${secondsText(tickMs)}) is not below half the control plane's worker lease (${secondsText(leaseMs)}), so its session could lapse between two lease pages; give a --tick below ${secondsText(leaseMs / TICKS_PER_WORKER_LEASE)}, or start the control plane with a --worker-lease above ${secondsText(tickMs * TICKS_PER_WORKER_LEASE)}.`,
    'ERR_PIDFENCE_WORKER_TICK_TOO_LONG',
  );
}

/**
 * Before any session exists, the tick is checked against the lease the control plane states, so a
 * refused tick changes nothing there or here (docs/decisions/0430). A control plane that does not
 * state it (an older one) or refuses the question leaves the answer to the registration.
 */
async function checkTick(send: Send, tickMs: number): Promise<void> {
  const terms = await send<{ leaseMs?: unknown }>('/v1/sessions/terms', {});
  const leaseMs = terms.status === 200 ? terms.body?.leaseMs : undefined;
  if (typeof leaseMs === 'number') validateTickForLease(tickMs, leaseMs);
}

/** A new session; what the operator sees in `pidfence workers` is announced with it. */
async function register(send: Send, state: { revoked: boolean }, options: WorkerOptions): Promise<string> {
  const registered = await send<{ sessionId: string }>('/v1/sessions', {});
  if (state.revoked)
    throw new PidfenceError(
      'the control plane refused this worker as revoked: an operator revoked its name or its certificate; ask them, or use a new certificate.',
      'ERR_PIDFENCE_WORKER_REVOKED',
    );
  if (registered.status !== 200)
    throw new PidfenceError('the control plane refused the worker session.', 'ERR_PIDFENCE_CLUSTER_SESSION');
  // An older control plane without the endpoint changes nothing.
  await send('/v1/workers/self', {
    version: options.version ?? packageVersion(),
    capacity: options.capacity ?? 4,
  }).catch(() => undefined);
  return registered.body.sessionId;
}

/** The local execution application on the worker's own journal (docs/decisions/0103, 0250). */
function openLocal(options: WorkerOptions, onReport: (runId: string, report: Report) => void) {
  const journalFile = path.resolve(options.journalFile);
  const local = openSqliteStore(journalFile);
  const app: ExecutionApplication = createExecution({
    stores: {
      runStore: local.runStore,
      repository: local.dispatchRepository,
      executionStore: local.executionStore,
      runnerStore: local.runnerStore,
      close: () => local.close(),
    },
    receiptDirectory: `${journalFile}.receipts`,
    logs: { directory: `${journalFile}.logs` },
    runnerKind: 'supervise',
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    ...(options.jobNice === undefined ? {} : { jobNice: options.jobNice }),
    onCompleted: (ref, outcome) => {
      const report = reportOf(outcome);
      if (report !== null) onReport(ref.runId, report);
    },
  });
  return { local, app, leases: new LeaseJournal(journalFile) };
}

type Report = NonNullable<ReturnType<typeof reportOf>>;

/**
 * The sessions this journal recorded whose worker process is proved gone by its local runner row
 * (docs/decisions/0360): only then can nothing of theirs still be admitted. An unproved one waits.
 */
async function earlierSessionsProvedGone(
  leases: LeaseJournal,
  local: SqliteStores,
  self: RunnerSelf,
): Promise<string[]> {
  const settleable: string[] = [];
  for (const record of leases.sessions()) {
    const runner = await local.runnerStore.runnerRecord(record.runnerId);
    if (runner !== null && runnerGoneProof(runner, self) !== null) settleable.push(record.sessionId);
  }
  return settleable;
}

/**
 * Starts a worker: one local execution application, one session, and one cycle at a time (docs/decisions/0200):
 * the next cycle is armed when the last one ended, so a stall never queues cycles. The leases an
 * earlier process journaled are held before recovery, so the ends it finds are reported (docs/decisions/0272).
 */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  if (options.controlPlaneUrls.length === 0)
    throw new PidfenceError('a worker needs at least one control-plane URL.', 'ERR_PIDFENCE_CLUSTER_CONFIG');
  if (options.jobNice !== undefined) validateJobNice(options.jobNice); // before a session exists
  const observe = observerOf(options);
  const { replicas, state, send } = connect(options, observe);
  const tickMs = options.tickMs ?? WORKER_TICK_DEFAULT_MS;
  await checkTick(send, tickMs).catch((error: unknown) => {
    replicas.close();
    throw error;
  });
  const session = { id: await register(send, state, options) };
  const completions: Array<{ runId: string; report: Report }> = [];
  const queue = (runId: string, report: Report): void => {
    if (!completions.some((queued) => queued.runId === runId)) completions.push({ runId, report });
  };
  const { local, app, leases } = openLocal(options, queue);
  // Recorded before the session pulls anything, with the runner that pulls (docs/decisions/0360).
  const recordSession = (sessionId: string): string => {
    leases.recordSession({ sessionId, runnerId: app.runner.runnerId });
    return sessionId;
  };
  const earlierSessions: string[] = [];
  const cycle = new WorkerCycle({
    options,
    observe,
    send,
    state,
    session,
    completions,
    leases,
    local,
    app,
    tickMs,
    reRegister: async () => recordSession(await register(send, state, options)),
    earlierSessions,
  });
  earlierSessions.push(...(await resumeJournaled({ cycle, leases, app, local, queue })));
  recordSession(session.id);
  const cycles = scheduleCycles(cycle, tickMs);
  return {
    get sessionId() {
      return session.id;
    },
    held: () => cycle.held.size,
    revoked: () => state.revoked,
    reloadTls: (tls) => replicas.reload(tls),
    close: async () => {
      if (cycles.isClosed()) return;
      await cycles.stop();
      await app.drain();
      await cycle.reportCompletions().catch(() => undefined);
      await send('/v1/sessions/end', { sessionId: session.id }).catch(() => undefined);
      replicas.close();
    },
  };
}

/**
 * The leases an earlier process journaled are held before recovery, so the ends it finds are
 * reported (docs/decisions/0272); then the local lifecycle starts. Returns the earlier sessions whose
 * process is proved gone, to be settled (docs/decisions/0360).
 */
async function resumeJournaled(worker: {
  readonly cycle: WorkerCycle;
  readonly leases: LeaseJournal;
  readonly app: ExecutionApplication;
  readonly local: ReturnType<typeof openLocal>['local'];
  readonly queue: (runId: string, report: Report) => void;
}): Promise<string[]> {
  const { cycle, app, local } = worker;
  for (const lease of worker.leases.read()) cycle.adopt(lease);
  await app.recover();
  app.start();
  for (const entry of cycle.held.values()) {
    const report = await journaledReport(local, entry.assignment.runId, entry.localAttemptId);
    if (report !== null) worker.queue(entry.assignment.runId, report);
  }
  return earlierSessionsProvedGone(worker.leases, local, app.runner);
}

/**
 * After a lease page that answered more than renewals, the next cycle starts this soon after the last
 * one began rather than a tick after it (docs/decisions/0397); it bounds a run of such cycles to ten a
 * second.
 */
const CYCLE_AGAIN_MS = 100;

/** One cycle at a time (docs/decisions/0200): the next is armed when the last one ended, so a stall never queues cycles. */
function scheduleCycles(cycle: WorkerCycle, tickMs: number): { isClosed(): boolean; stop(): Promise<void> } {
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const arm = (delayMs: number): void => {
    timer = setTimeout(() => {
      const started = performance.now();
      running = cycle.run(closed).then((answered) => {
        const spacingMs = answered ? Math.min(CYCLE_AGAIN_MS, tickMs) : tickMs;
        if (!closed) arm(Math.max(0, spacingMs - (performance.now() - started)));
      });
    }, delayMs);
  };
  // A restarted worker re-attaches at once; a new one waits a tick.
  arm(cycle.held.size > 0 ? 0 : tickMs);
  // Its own timer: a cycle waiting on a control plane that does not answer must not hold the opt-in stop back (docs/decisions/0273).
  const disconnects = setInterval(() => {
    cycle.afterDisconnect().catch(() => undefined);
  }, tickMs);
  return {
    isClosed: () => closed,
    // Closed at once, so a second close returns; resolves when the cycle under way has ended.
    async stop() {
      closed = true;
      clearTimeout(timer);
      clearInterval(disconnects);
      await running;
    },
  };
}
