// One cycle of the remote worker (docs/decisions/0200, 0201): report completions (a page per request,
// docs/decisions/0432), re-attach what a restarted worker or a new session holds (docs/decisions/
// 0272), send one lease page naming every
// lease held (long-polled: the control plane answers early when a stop is due), act on the answers,
// then pull up to the free slots in one request. A failed renewal stops nothing (docs/decisions/0273).
// A stop becomes local durable cancel intent, so the local lifecycle stops the job through its
// verified controller with its own durable handle; no PID, handle or command leaves this process.
// The stops of one answer are written in one synced transaction and handed over together (docs/decisions/0370).
import { randomUUID } from 'node:crypto';

import { PidfenceError } from '../base/errors';
import { monotonicNow } from '../base/time';
import { DUE_PAGE_MAX, type RequestCancellationOutcome, type RunTerminalStatus } from '../contract/index';
import type { ExecutionApplication } from '../execution/index';
import type { Assignment, LeaseTickAnswer, PullPageOutcome } from '../store/postgres/index';
import type { openSqliteStore } from '../store/sqlite/index';
import type { JournaledLease, LeaseJournal } from './lease-journal';
import { COMPLETION_PAGE_MAX, LEASE_PAGE_WAIT_MAX_MS } from './schemas';

type Send = <T>(path: string, body: unknown, timeoutMs?: number) => Promise<{ status: number; body: T }>;
type Report = {
  status: RunTerminalStatus;
  cause: 'receipt' | 'never_started' | 'stopped' | 'lost';
  exit: { exitCode: number | null; signal: string | null } | null;
};

/** The lease page's answer: only the leases whose answer is not a plain renewal. */
export interface LeasePageReply {
  readonly session: 'live' | 'lapsed' | 'lost';
  readonly answers: ReadonlyArray<{
    readonly runId: string;
    readonly kind: string;
    readonly scope?: 'run' | 'attempt';
    readonly reason?: string;
    readonly code?: string;
    /** With `unnamed` (docs/decisions/0434): the lease the control plane holds for this session. */
    readonly attemptId?: string;
    readonly fence?: number;
    readonly projectId?: string;
  }>;
}

export interface Held {
  readonly assignment: JournaledLease;
  /** The local attempt (the local runner's own id for the same run). */
  localAttemptId: string | null;
  stopping: boolean;
  /** False until this session holds the lease: a restarted worker re-attaches first (docs/decisions/0272). */
  attached: boolean;
  /** The monotonic time of the last renewal the control plane answered (docs/decisions/0273). */
  lastAnsweredMs: number;
}

type QueuedEnd = { runId: string; report: Report };

export interface CycleParts {
  readonly options: { readonly capacity?: number };
  readonly observe: (what: string, code?: string) => void;
  readonly send: Send;
  readonly state: { readonly revoked: boolean };
  readonly session: { id: string };
  readonly completions: QueuedEnd[];
  readonly leases: LeaseJournal;
  readonly local: ReturnType<typeof openSqliteStore>;
  readonly app: ExecutionApplication;
  readonly tickMs: number;
  readonly reRegister: () => Promise<string>;
  /** Earlier sessions of this journal whose process is proved gone, to settle (docs/decisions/0360). */
  readonly earlierSessions: string[];
}

type StopReason = 'user' | 'timeout' | 'shutdown';

/** One run to stop locally: why, and whether nothing of it is held once its intent is durable. */
interface LocalStop {
  readonly entry: Held;
  readonly reason: StopReason;
  readonly dropAfter: boolean;
}

type IntentOutcome = RequestCancellationOutcome | { readonly kind: 'failed'; readonly error: unknown };

const STOP_REASON = { run: 'user', attempt: 'timeout' } as const;
/** A silent replica is given up after the long-poll plus this margin (docs/decisions/0202). */
const REQUEST_MARGIN_MS = 2_000;
/** Refusals that say this worker will never again hold the run. */
const GONE_CODES = new Set(['ERR_PIDFENCE_WORKER_FORGOTTEN', 'ERR_PIDFENCE_CLUSTER_LEASE_NOT_YOURS']);

/** Milliseconds on the monotonic clock: a wall-clock step changes no disconnect time (docs/decisions/0273). */
export function monotonicMs(): number {
  return Number(monotonicNow() / 1_000_000n);
}

function codeOf(reply: { status: number; body: unknown }): string {
  const code = (reply.body as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : `http_${reply.status}`;
}

export class WorkerCycle {
  readonly held = new Map<string, Held>();
  readonly #parts: CycleParts;
  #sessionOpen = true;

  constructor(parts: CycleParts) {
    this.#parts = parts;
  }

  /** A lease an earlier process journaled: held, not attached, before local recovery reports its end. */
  adopt(lease: JournaledLease): void {
    this.held.set(lease.runId, {
      assignment: lease,
      localAttemptId: lease.localAttemptId,
      stopping: false,
      attached: false,
      lastAnsweredMs: monotonicMs(),
    });
  }

  /**
   * One bounded cycle; every failure is observed by code and the next cycle starts afresh. True when
   * the lease page answered more than renewals: the next page should wait again at once, so a stop
   * requested meanwhile is pushed into it rather than left for the next tick (docs/decisions/0397).
   */
  async run(closed: boolean): Promise<boolean> {
    const { observe, state } = this.#parts;
    try {
      if (!this.#sessionOpen && !state.revoked) await this.#renewSession();
      await this.#attachAll();
      await this.#settleEarlier();
      await this.reportCompletions();
      const answered = await this.#leasePage(closed);
      const free = (this.#parts.options.capacity ?? 4) - this.held.size;
      if (!closed && !state.revoked && this.#sessionOpen && free > 0) await this.#pull(free);
      return answered;
    } catch (error) {
      observe('cycle_failed', error instanceof PidfenceError ? error.code : 'ERR_PIDFENCE_CLUSTER_INTERNAL');
      return false;
    }
  }

  /**
   * Reports queued ends, oldest first, of runs this session holds, up to COMPLETION_PAGE_MAX in one
   * request (docs/decisions/0432); each answer is acted on as the single report's, and a refusal for
   * good drops the run. A replica without the page takes them one by one for this cycle.
   */
  async reportCompletions(): Promise<void> {
    for (;;) {
      const page = this.#nextPage();
      if (page.length === 0) return;
      const sent = await this.#reportPage(page);
      if (sent === 'kept') return;
      if (sent === 'no_page') return this.#reportOneByOne();
    }
  }

  /**
   * The oldest queued ends of attached runs, up to a page, each run once; an end of a run not held is
   * dequeued without a request, and an unattached run's end waits, with every end behind it.
   */
  #nextPage(): QueuedEnd[] {
    const { completions } = this.#parts;
    const page: QueuedEnd[] = [];
    const named = new Set<string>();
    for (let i = 0; i < completions.length && page.length < COMPLETION_PAGE_MAX;) {
      const next = completions[i] as QueuedEnd;
      const entry = this.held.get(next.runId);
      if (entry === undefined) {
        completions.splice(i, 1);
        continue;
      }
      if (!entry.attached || named.has(next.runId)) break;
      named.add(next.runId);
      page.push(next);
      i++;
    }
    return page;
  }

  /**
   * One page in one request. `kept`: nothing of it was taken (a 5xx, a 403, or an answer that left
   * some end unanswered), it waits for the next cycle; `no_page`: this replica refused the page itself.
   */
  async #reportPage(page: readonly QueuedEnd[]): Promise<'answered' | 'kept' | 'no_page'> {
    const { send, observe, session, completions } = this.#parts;
    const reply = await send<{ answers?: ReadonlyArray<{ runId: string; kind: string; code?: string }> }>(
      '/v1/completions/page',
      { sessionId: session.id, completions: page.map((queued) => this.#reportOf(queued)) },
    );
    // A revoked worker keeps its reports: what becomes of its runs is not decided by a refusal.
    if (reply.status >= 500 || reply.status === 403) return 'kept';
    if (reply.status !== 200) {
      observe('completion_page_fallback', codeOf(reply));
      return 'no_page';
    }
    const answers = new Map((reply.body.answers ?? []).map((answer) => [answer.runId, answer]));
    const taken: string[] = [];
    for (const queued of page) {
      const answer = answers.get(queued.runId);
      if (answer === undefined) continue;
      observe(
        answer.kind === 'refused' ? 'completion_refused' : `completion_${answer.kind}`,
        answer.kind === 'refused' ? (answer.code ?? 'http_200') : undefined,
      );
      taken.push(queued.runId);
      const at = completions.indexOf(queued);
      if (at >= 0) completions.splice(at, 1);
    }
    this.#dropAll(taken);
    return page.every((queued) => answers.has(queued.runId)) ? 'answered' : 'kept';
  }

  /** What /v1/completions takes today for one queued end, one request each (an older replica). */
  async #reportOneByOne(): Promise<void> {
    const { completions, send, observe, session } = this.#parts;
    while (completions.length > 0) {
      const next = completions[0] as QueuedEnd;
      const entry = this.held.get(next.runId);
      if (entry !== undefined) {
        if (!entry.attached) return;
        const reply = await send<{ kind: string; code?: string }>('/v1/completions', {
          sessionId: session.id,
          ...this.#reportOf(next),
        });
        // A revoked worker keeps its reports: what becomes of its runs is not decided by a refusal.
        if (reply.status >= 500 || reply.status === 403) return;
        observe(
          reply.status === 200 ? `completion_${reply.body.kind}` : 'completion_refused',
          reply.status === 200 ? undefined : codeOf(reply),
        );
        this.#drop(next.runId);
      }
      completions.shift();
    }
  }

  /** A queued end as the control plane takes it: the held lease and the report. */
  #reportOf(queued: QueuedEnd): Record<string, unknown> {
    const { runId, attemptId, fence } = (this.held.get(queued.runId) as Held).assignment;
    return { runId, attemptId, fence, ...queued.report };
  }

  /** Opt-in only (docs/decisions/0273): a job that asked to stop after a disconnect, on the monotonic clock. */
  async afterDisconnect(): Promise<void> {
    const now = monotonicMs();
    const stops: LocalStop[] = [];
    for (const entry of this.held.values()) {
      const limit = entry.assignment.stopAfterDisconnectMs;
      if (limit === null || entry.stopping || now - entry.lastAnsweredMs < limit) continue;
      this.#parts.observe('stopped_after_disconnect');
      stops.push({ entry, reason: 'shutdown', dropAfter: false });
    }
    await this.#stopLocally(stops);
  }

  /** The leases this session does not hold yet, one attach each; its answer is the tick's (a pending stop comes at once). */
  async #attachAll(): Promise<void> {
    const { send, session, observe } = this.#parts;
    for (const entry of [...this.held.values()]) {
      if (entry.attached) continue;
      const { runId, attemptId, fence } = entry.assignment;
      const reply = await send<LeaseTickAnswer & { code?: string }>('/v1/leases/attach', {
        sessionId: session.id,
        runId,
        attemptId,
        fence,
      }).catch((error: unknown) => {
        observe('tick_failed', error instanceof PidfenceError ? error.code : 'ERR_PIDFENCE_CLUSTER_UNREACHABLE');
        return null;
      });
      if (reply === null) continue;
      if (reply.status !== 200) {
        observe('tick_failed', codeOf(reply));
        if (GONE_CODES.has(codeOf(reply))) await this.#stopLocally([{ entry, reason: 'shutdown', dropAfter: true }]);
        continue;
      }
      entry.attached = true;
      entry.lastAnsweredMs = monotonicMs();
      await this.#stopLocally(this.#stopsOf([{ runId, ...reply.body }]));
    }
  }

  /**
   * Once every journaled lease is attached here, each earlier session of this journal is settled
   * (docs/decisions/0360): what it still holds was never journaled, so never started. A refusal for
   * good (409) drops the record; anything else is tried again next cycle.
   */
  async #settleEarlier(): Promise<void> {
    const { earlierSessions, send, session, leases, observe } = this.#parts;
    if (earlierSessions.length === 0 || [...this.held.values()].some((entry) => !entry.attached)) return;
    while (earlierSessions.length > 0) {
      const earlierSessionId = earlierSessions[0] as string;
      const reply = await send<{ neverStarted: number; code?: string }>('/v1/sessions/settle', {
        sessionId: session.id,
        earlierSessionId,
      });
      if (reply.status !== 200 && reply.status !== 409) {
        observe('settle_failed', codeOf(reply));
        return;
      }
      observe(
        reply.status === 200 ? 'session_settled' : 'settle_refused',
        reply.status === 200 ? undefined : codeOf(reply),
      );
      leases.removeSession(earlierSessionId);
      earlierSessions.shift();
    }
  }

  /** Every attached lease in one request, held by the control plane up to one tick while nothing is due. */
  /** The page of every lease held; true when it answered more than renewals. */
  async #leasePage(closed: boolean): Promise<boolean> {
    const { send, observe, session, tickMs } = this.#parts;
    const mine = [...this.held.values()].filter((entry) => entry.attached && !entry.stopping);
    const leases = mine.map(({ assignment: { runId, attemptId, fence } }) => ({ runId, attemptId, fence }));
    // A tick longer than a page may wait (`--tick 12s`) waits the longest a page may: asking for more
    // was refused as a bad request, and no lease was ever renewed (docs/decisions/0397).
    const waitMs = closed || leases.length === 0 ? 0 : Math.min(tickMs, LEASE_PAGE_WAIT_MAX_MS);
    const reply = await send<LeasePageReply & { code?: string }>(
      '/v1/workers/leases',
      { sessionId: session.id, leases, waitMs },
      waitMs + REQUEST_MARGIN_MS + tickMs,
    );
    if (reply.status !== 200) {
      // A failed renewal stops nothing (docs/decisions/0273): the lease waits for this worker.
      observe('tick_failed', reply.body?.code ?? `http_${reply.status}`);
      return false;
    }
    observe(`page_${reply.body.session}`);
    if (reply.body.session !== 'live') this.#sessionOpen = false;
    else for (const entry of mine) entry.lastAnsweredMs = monotonicMs();
    await this.#stopLocally(this.#stopsOf(reply.body.answers));
    return reply.body.answers.length > 0;
  }

  /** What the answers ask of this worker: each observed, a closed session noted, the local stops. */
  #stopsOf(answers: LeasePageReply['answers']): LocalStop[] {
    const stops: LocalStop[] = [];
    for (const answer of answers) {
      const entry = this.held.get(answer.runId);
      this.#parts.observe(`tick_${answer.kind}`, answer.code);
      if (entry === undefined && answer.kind === 'unnamed') this.#neverReceived(answer);
      if (entry === undefined) continue;
      // A closed session is not a lost run: a new session re-attaches it (docs/decisions/0272).
      if (answer.kind === 'lost' && answer.reason === 'session') this.#sessionOpen = false;
      else if (answer.kind === 'stop_requested')
        stops.push({ entry, reason: STOP_REASON[answer.scope ?? 'run'], dropAfter: false });
      else if (answer.kind === 'terminal' || answer.kind === 'lost')
        stops.push({ entry, reason: 'shutdown', dropAfter: answer.kind === 'lost' });
    }
    return stops;
  }

  /**
   * A lease of this session that this worker never held (docs/decisions/0434): the answer of the
   * pull that granted it never arrived, so its job was never started here, and never will be. It is
   * held only to be reported `never_started`, as an admission that failed is; its record is not
   * journaled (a restart settles the session's unjournaled leases the same way, docs/decisions/0360).
   */
  #neverReceived(answer: LeasePageReply['answers'][number]): void {
    const { runId, attemptId, fence, projectId } = answer;
    if (attemptId === undefined || fence === undefined || projectId === undefined) return;
    this.held.set(runId, {
      assignment: { runId, projectId, attemptId, fence, localAttemptId: null, stopAfterDisconnectMs: null },
      localAttemptId: null,
      stopping: false,
      attached: true,
      lastAnsweredMs: monotonicMs(),
    });
    this.#parts.completions.push({ runId, report: { status: 'failed', cause: 'never_started', exit: null } });
    this.#parts.observe('lease_never_received');
  }

  /** A closed session pulls nothing: a new one is registered and every held run re-attaches to it. */
  async #renewSession(): Promise<void> {
    this.#parts.session.id = await this.#parts.reRegister();
    this.#sessionOpen = true;
    for (const entry of this.held.values()) entry.attached = false;
    this.#parts.observe('session_renewed');
  }

  async #pull(free: number): Promise<void> {
    const { send, session } = this.#parts;
    // Named, so a replica that gets it again after a timeout answers what it granted (docs/decisions/0437).
    const reply = await send<PullPageOutcome>('/v1/assignments/pull', {
      sessionId: session.id,
      max: Math.min(free, 64),
      pullId: `pull-${randomUUID()}`,
    });
    if (reply.status !== 200) return;
    if (reply.body.kind === 'session_closed') this.#sessionOpen = false;
    if (reply.body.kind !== 'assigned') return;
    for (const assignment of reply.body.assignments) await this.#admit(assignment);
  }

  async #admit(assignment: Assignment): Promise<void> {
    const { leases, app, completions } = this.#parts;
    const lease: JournaledLease = {
      runId: assignment.runId,
      projectId: assignment.projectId,
      attemptId: assignment.attemptId,
      fence: assignment.fence,
      localAttemptId: null,
      stopAfterDisconnectMs: assignment.stopAfterDisconnectMs ?? null,
    };
    // Synced before the job can start: a restart finds every run this worker may have started.
    leases.write(lease);
    const entry: Held = {
      assignment: lease,
      localAttemptId: null,
      stopping: false,
      attached: true,
      lastAnsweredMs: monotonicMs(),
    };
    this.held.set(assignment.runId, entry);
    const [command, ...args] = assignment.argv;
    const admitted = await app.admit({
      projectId: assignment.projectId,
      runId: assignment.runId,
      command: command as string,
      args,
      // No local deadline: a task timeout is the control plane's (stop_requested, scope attempt).
      stdio: 'ignore',
    });
    if (admitted.kind === 'admitted') {
      entry.localAttemptId = admitted.attemptId;
      leases.write({ ...lease, localAttemptId: admitted.attemptId });
    } else
      completions.push({ runId: assignment.runId, report: { status: 'failed', cause: 'never_started', exit: null } });
  }

  /** The run's end was taken (or refused for good): nothing of it is held any more. */
  #drop(runId: string): void {
    this.#dropAll([runId]);
  }

  /** The ends of a page were taken: their records go with one directory sync (docs/decisions/0433). */
  #dropAll(runIds: readonly string[]): void {
    for (const runId of runIds) this.held.delete(runId);
    this.#parts.leases.removeAll(runIds);
  }

  /**
   * The stops of one answer (docs/decisions/0370): their local cancel intents in one synced
   * transaction per page of DUE_PAGE_MAX, then the local lifecycle told of them together. A run
   * already stopping is only dropped if asked; one whose intent could not be written is neither
   * dropped nor signalled: its stop stays undelivered and the next cycle's answer brings it again.
   */
  async #stopLocally(stops: readonly LocalStop[]): Promise<void> {
    const due = new Map<string, LocalStop>();
    for (const stop of stops) {
      if (stop.entry.stopping) {
        if (stop.dropAfter) this.#drop(stop.entry.assignment.runId);
      } else due.set(stop.entry.assignment.runId, stop);
    }
    const pending = [...due.values()];
    let failure: unknown = null;
    for (let start = 0; start < pending.length; start += DUE_PAGE_MAX) {
      const page = pending.slice(start, start + DUE_PAGE_MAX);
      const outcomes = await this.#writeIntents(page);
      page.forEach((stop, i) => {
        const outcome = outcomes[i] as IntentOutcome;
        if (outcome.kind === 'failed') failure ??= outcome.error;
        else this.#handOver(stop, outcome);
      });
    }
    if (failure !== null) throw failure;
  }

  /**
   * One page of intents in one synced transaction. A page that cannot be written is tried once
   * more one run at a time, so a failure stays its own run's; a failed run is not stopping.
   */
  async #writeIntents(page: readonly LocalStop[]): Promise<IntentOutcome[]> {
    const { runStore } = this.#parts.local;
    const commands = page.map(({ entry, reason }) => ({
      runId: entry.assignment.runId,
      reason,
      eventId: `evt-${randomUUID()}`,
    }));
    for (const { entry } of page) entry.stopping = true;
    let outcomes: IntentOutcome[];
    try {
      outcomes = await runStore.requestCancellations(commands);
    } catch {
      outcomes = [];
      for (const command of commands)
        outcomes.push(
          await runStore.requestCancellation(command).catch((error: unknown) => ({ kind: 'failed', error }) as const),
        );
    }
    page.forEach(({ entry }, i) => {
      if (outcomes[i]?.kind === 'failed') entry.stopping = false;
    });
    return outcomes;
  }

  /** The intent is durable: the run is dropped if asked, and the local lifecycle is told to stop it. */
  #handOver(stop: LocalStop, outcome: RequestCancellationOutcome): void {
    // The control plane will take no report of this run: once stopped locally, nothing is held.
    if (stop.dropAfter) this.#drop(stop.entry.assignment.runId);
    if (outcome.kind === 'run_missing' || stop.entry.localAttemptId === null) return;
    // The local lifecycle's cycle claims the local dispatch and stops the exact group; a notice
    // pulls its one timer forward instead of waiting out the period (one wake for the page).
    this.#parts.app.notices.add({ runId: stop.entry.assignment.runId, attemptId: stop.entry.localAttemptId });
  }
}
