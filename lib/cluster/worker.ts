// The remote worker (docs/decisions/0103; design/cluster): registers a session with the control plane,
// pulls jobs, runs each locally with the execution lifecycle on its own SQLite journal, ticks lease
// control at its cadence and reports completions. A stop from the control plane becomes local
// durable cancel intent, so the local lifecycle stops the job through its verified controller with
// its own durable handle; no PID, handle or command leaves this process.
import { randomUUID } from 'node:crypto';
import path from 'node:path';

import { PidfenceError } from '../base/errors';
import type { RunTerminalStatus } from '../contract/index';
import { createExecution, type CompletionOutcome, type ExecutionApplication } from '../execution/index';
import { openSqliteStore } from '../store/sqlite/index';
import { ControlPlaneClient, type ClientTls } from './client';
import type { Assignment, LeaseTickAnswer, PullOutcome } from './lease-store';

export interface WorkerOptions {
  readonly controlPlaneUrls: readonly string[];
  readonly tls: ClientTls;
  /** The worker's local SQLite journal; receipts live beside it. */
  readonly journalFile: string;
  /** Jobs run at once (default 4). */
  readonly capacity?: number;
  /** The lease-control cadence (default 1 s); keep it well under the control plane's worker lease. */
  readonly tickMs?: number;
  readonly graceMs?: number;
  /** Fixed-state observations (tick answers, failures by code); never ids or commands. */
  readonly observe?: (event: { readonly what: string; readonly code?: string }) => void;
}

export interface Worker {
  readonly sessionId: string;
  /** Runs held now. */
  held(): number;
  /** Stops pulling, drains the local lifecycle (stopping what still runs), ends the session. */
  close(): Promise<void>;
}

interface Held {
  readonly assignment: Assignment;
  /** The local attempt (the local runner's own id for the same run). */
  localAttemptId: string | null;
  stopping: boolean;
}

const STOP_REASON = { run: 'user', attempt: 'timeout' } as const;

function reportOf(outcome: CompletionOutcome): { status: RunTerminalStatus; cause: 'receipt' | 'never_started' | 'stopped' | 'lost'; exit: { exitCode: number | null; signal: string | null } | null } | null {
  if (outcome.kind === 'completed') return { status: outcome.status, cause: outcome.cause, exit: { exitCode: outcome.exitCode, signal: outcome.signal } };
  if (outcome.kind === 'terminal') return { status: outcome.status, cause: 'stopped', exit: null };
  return null;
}

/** Starts a worker: one local execution application, one session, one cadence timer. */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  if (options.controlPlaneUrls.length === 0) throw new PidfenceError('a worker needs at least one control-plane URL.', 'ERR_PIDFENCE_CLUSTER_CONFIG');
  const clients = options.controlPlaneUrls.map((url) => new ControlPlaneClient(url, options.tls));
  let turn = 0;
  /** Alternates between replicas; a replica that cannot be reached is skipped for this call. */
  const send = async <T>(path: string, body: unknown): Promise<{ status: number; body: T }> => {
    let lastError: unknown;
    for (let i = 0; i < clients.length; i++) {
      const client = clients[(turn++) % clients.length] as ControlPlaneClient;
      try {
        return await client.send<T>('POST', path, body);
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  };
  const observe = (what: string, code?: string): void => {
    try {
      options.observe?.(code === undefined ? { what } : { what, code });
    } catch {
      // observation only
    }
  };

  const registered = await send<{ sessionId: string }>('/v1/sessions', {});
  if (registered.status !== 200) throw new PidfenceError('the control plane refused the worker session.', 'ERR_PIDFENCE_CLUSTER_SESSION');
  const { sessionId } = registered.body;
  const held = new Map<string, Held>();
  const completions: Array<{ runId: string; report: NonNullable<ReturnType<typeof reportOf>> }> = [];
  const journalFile = path.resolve(options.journalFile);
  const local = openSqliteStore(journalFile);
  const app: ExecutionApplication = createExecution({
    stores: { runStore: local.runStore, repository: local.dispatchRepository, executionStore: local.executionStore, runnerStore: local.runnerStore, close: () => local.close() },
    receiptDirectory: `${journalFile}.receipts`,
    runnerKind: 'supervise',
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    onCompleted: (ref, outcome) => {
      const report = reportOf(outcome);
      if (report !== null) completions.push({ runId: ref.runId, report });
    },
  });
  await app.recover();
  app.start();

  const stopLocally = async (entry: Held, reason: 'user' | 'timeout' | 'shutdown'): Promise<void> => {
    if (entry.stopping) return;
    entry.stopping = true;
    await local.runStore.requestCancellation({ runId: entry.assignment.runId, reason, eventId: `evt-${randomUUID()}` });
    // The local lifecycle's cycle claims the local dispatch and stops the exact group; a notice
    // pulls its one timer forward instead of waiting out the period.
    if (entry.localAttemptId !== null) app.notices.add({ runId: entry.assignment.runId, attemptId: entry.localAttemptId });
  };

  const reportCompletions = async (): Promise<void> => {
    while (completions.length > 0) {
      const next = completions[0] as (typeof completions)[number];
      const entry = held.get(next.runId);
      if (entry !== undefined) {
        const { runId, attemptId, fence } = entry.assignment;
        const reply = await send<{ kind: string }>('/v1/completions', { sessionId, runId, attemptId, fence, ...next.report });
        if (reply.status >= 500) return;
        observe(`completion_${reply.body.kind}`);
        held.delete(next.runId);
      }
      completions.shift();
    }
  };

  const tickOne = async (entry: Held): Promise<void> => {
    const { runId, attemptId, fence } = entry.assignment;
    const reply = await send<LeaseTickAnswer & { code?: string; tracking?: string }>('/v1/lease-control', { sessionId, runId, attemptId, fence });
    if (reply.status !== 200) {
      observe('tick_failed', reply.body?.code ?? `http_${reply.status}`);
      return;
    }
    const answer = reply.body;
    observe(`tick_${answer.kind}`);
    if (answer.kind === 'stop_requested') await stopLocally(entry, STOP_REASON[answer.scope]);
    else if (answer.kind === 'terminal' || answer.kind === 'lost') await stopLocally(entry, 'shutdown');
  };

  const pullOne = async (): Promise<void> => {
    const reply = await send<PullOutcome>('/v1/assignments/pull', { sessionId });
    if (reply.status !== 200 || reply.body.kind !== 'assigned') return;
    const { assignment } = reply.body;
    const entry: Held = { assignment, localAttemptId: null, stopping: false };
    held.set(assignment.runId, entry);
    const [command, ...args] = assignment.argv;
    const admitted = await app.admit({
      projectId: assignment.projectId, runId: assignment.runId, command: command as string, args,
      // No local deadline: a task timeout is the control plane's (stop_requested, scope attempt).
      stdio: 'ignore',
    });
    if (admitted.kind === 'admitted') entry.localAttemptId = admitted.attemptId;
    else completions.push({ runId: assignment.runId, report: { status: 'failed', cause: 'never_started', exit: null } });
  };

  let closed = false;
  let cycle: Promise<void> = Promise.resolve();
  const runCycle = async (): Promise<void> => {
    try {
      await reportCompletions();
      for (const entry of [...held.values()]) await tickOne(entry);
      if (!closed && held.size < (options.capacity ?? 4)) await pullOne();
    } catch (error) {
      observe('cycle_failed', error instanceof PidfenceError ? error.code : 'ERR_PIDFENCE_CLUSTER_INTERNAL');
    }
  };
  const timer = setInterval(() => {
    cycle = cycle.then(runCycle);
  }, options.tickMs ?? 1_000);

  return {
    sessionId,
    held: () => held.size,
    close: async () => {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      await cycle;
      await app.drain();
      await reportCompletions().catch(() => undefined);
      await send('/v1/sessions/end', { sessionId }).catch(() => undefined);
      for (const client of clients) client.close();
    },
  };
}
