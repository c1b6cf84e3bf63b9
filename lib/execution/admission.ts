// Admission (design/execution §1-2, §5): creates the run (with its name, docs/decisions/0251) and a
// `claimed` attempt with its receipt-token digest, marks it `starting`, starts the launcher as a
// process-group leader (keeping the job's output in the run's log, docs/decisions/0250), stores its
// durable handle (`running`) and only then sends the launcher its order: a job starts only once the
// handle that proves it is stored, so `starting` without a handle is never a job (docs/decisions/0310).
// The command, arguments and environment never reach the store, an event
// or a log line of pidfence's own. The launcher's exit reaches the lifecycle only as a coalesced notice
// (no completion Promise).
import { randomUUID } from 'node:crypto';

import type { Environment } from '../base/environment';
import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { validateId, validateRunName, type AttemptActiveStatus } from '../contract/index';
import { launcherPath } from '../native/index';
import {
  LocalProcessController,
  removeEndedJobCgroup,
  type GroupLeaderSpawnOptions,
  type HeldGroups,
} from '../process/index';
import type { RunStore } from '../store/run-store';
import { ensureLogDirectory, validateJobLogSettings, type JobLogSettings } from './job-log';
import {
  validateJobArgv,
  validateJobNice,
  validateLeftoverGraceMs,
  validateLeftoverPolicy,
  type LeftoverPolicy,
} from './launch-order';
import { spawnLauncher, type PendingLaunch } from './launcher';
import type { CompletionNotices } from './notices';
import { createReceiptToken, receiptTokenDigest } from './receipts';

/** The TERM grace when admission must undo a start whose handle could not be stored. */
export const ADMISSION_UNDO_GRACE_MS = 1_000;
export const ARGS_MAX = 4096;

export interface AdmitRequest {
  readonly projectId: string;
  /** Default: a fresh `run-<uuid>`. */
  readonly runId?: string;
  /** A label for people, shown by list, show and the status page (docs/decisions/0251); not unique. */
  readonly name?: string;
  readonly command: string;
  readonly args?: readonly string[];
  /** Relative: the store turns it into the attempt's absolute deadline. */
  readonly timeoutMs?: number;
  readonly env?: Environment;
  readonly stdio?: GroupLeaderSpawnOptions['stdio'];
  readonly cwd?: string;
  /** Processes still alive after the job's leader ended: stopped (default) or left running (docs/decisions/0152). */
  readonly leftovers?: LeftoverPolicy;
  /** TERM → KILL grace for those leftovers, in ms. */
  readonly leftoverGraceMs?: number;
}

/** Low-sensitivity: ids and the attempt's state only. */
export type AdmitOutcome =
  | {
      readonly kind: 'admitted';
      readonly runId: string;
      readonly attemptId: string;
      readonly status: AttemptActiveStatus;
    }
  | { readonly kind: 'refused'; readonly reason: 'closed' | 'run_exists' };

export interface AdmissionOptions {
  readonly runStore: RunStore;
  readonly notices: CompletionNotices;
  readonly receiptDirectory: string;
  /** The runner that owns every attempt admitted here (docs/decisions/0070). */
  readonly runnerId?: string;
  /** Each launched group is held from its spawn on, so it stays reachable if the launcher dies. */
  readonly heldGroups?: HeldGroups;
  /** Where each run's output is kept (docs/decisions/0250); omitted: not kept. */
  readonly log?: JobLogSettings;
  /** How much nicer than this runner its jobs run (docs/decisions/0441); default 0. */
  readonly jobNice?: number;
}

function validateRequest(request: AdmitRequest): { command: string; args: readonly string[] } {
  if (typeof request.command !== 'string' || request.command.length === 0) {
    throw new PidfenceTypeError(
      'command must be a non-empty string (the program to run).',
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  const args = request.args ?? [];
  if (!Array.isArray(args) || args.length > ARGS_MAX || !args.every((arg) => typeof arg === 'string')) {
    throw new PidfenceRangeError(
      `args must be an array of at most ${ARGS_MAX} strings.`,
      'ERR_PIDFENCE_INVALID_COMMAND',
    );
  }
  validateJobArgv(request.command, args);
  if (request.name !== undefined) validateRunName(request.name);
  if (request.leftovers !== undefined) validateLeftoverPolicy(request.leftovers);
  if (request.leftoverGraceMs !== undefined) validateLeftoverGraceMs(request.leftoverGraceMs);
  launcherPath(); // no launcher: refused before anything is stored
  return { command: request.command, args };
}

/** A validated request's job and the ids admission gives it. */
interface AdmittedJob {
  readonly command: string;
  readonly args: readonly string[];
  readonly runId: string;
  readonly attemptId: string;
}

export class Admission {
  readonly #runStore: RunStore;
  readonly #notices: CompletionNotices;
  readonly #receiptDirectory: string;
  readonly #runnerId: string | undefined;
  readonly #held: HeldGroups | undefined;
  readonly #log: Required<JobLogSettings> | undefined;
  readonly #jobNice: number;
  /** Created at the first admission: a runner that never starts a job (a cancel, a supervise) makes no directory. */
  #logDirectoryMade = false;
  /**
   * attemptId → handle of what this admission launched and is not yet known ended (for escalation,
   * never stored elsewhere); forgotten at its end, so a long-lived runner keeps only its live jobs.
   */
  readonly #handles = new Map<string, string>();
  /** Attempts between their creation and their handle's commit (or the order's withdrawal). */
  readonly #admitting = new Set<string>();
  /** Attempts whose launcher this process spawned and has not seen exit (docs/decisions/0439). */
  readonly #launchersRunning = new Set<string>();
  #open = true;
  #inFlight = new Set<Promise<unknown>>();

  constructor(options: AdmissionOptions) {
    this.#runStore = options.runStore;
    this.#notices = options.notices;
    this.#receiptDirectory = options.receiptDirectory;
    this.#runnerId = options.runnerId;
    this.#held = options.heldGroups;
    this.#log = options.log === undefined ? undefined : validateJobLogSettings(options.log);
    this.#jobNice = validateJobNice(options.jobNice ?? 0);
  }

  /** KILL to the group of a job launched here, through its held pidfd; false when none is held. */
  killGroup(attemptId: string): boolean {
    const handle = this.#handles.get(attemptId);
    const hold = handle === undefined ? null : (this.#held?.get(handle) ?? null);
    return hold !== null && hold.signalGroup('SIGKILL').kind === 'signalled';
  }

  /** The attempt has ended: its handle is no longer needed for escalation (its group hold is released too). */
  forget(attemptId: string): void {
    this.#handles.delete(attemptId);
  }

  /** How many launched attempts' handles are kept: those not yet forgotten at their end. */
  rememberedHandleCount(): number {
    return this.#handles.size;
  }

  /**
   * Whether this admission may still start the attempt. The completion processor asks before it reads
   * the attempt: an attempt it then finds unstarted, not being admitted here, can start no job.
   */
  isAdmitting(attemptId: string): boolean {
    return this.#admitting.has(attemptId);
  }

  /**
   * Whether the attempt's launcher was spawned by this process and has not exited (docs/decisions/0439):
   * its exit brings a notice, so the period's backstop need not look at the attempt meanwhile.
   */
  launcherRunning(attemptId: string): boolean {
    return this.#launchersRunning.has(attemptId);
  }

  get open(): boolean {
    return this.#open;
  }

  /** Stops admitting; resolves when admissions already under way have stored their handle. */
  async close(): Promise<void> {
    this.#open = false;
    await Promise.allSettled([...this.#inFlight]);
  }

  admit(request: AdmitRequest): Promise<AdmitOutcome> {
    if (!this.#open) return Promise.resolve({ kind: 'refused', reason: 'closed' });
    const work = this.#admitTracked(request);
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  async #admitTracked(request: AdmitRequest): Promise<AdmitOutcome> {
    const { command, args } = validateRequest(request);
    const runId = request.runId === undefined ? `run-${randomUUID()}` : validateId(request.runId, 'runId');
    const attemptId = `${runId}-a1`;
    // Marked before the attempt exists: whoever reads it afterwards asks this first.
    this.#admitting.add(attemptId);
    try {
      return await this.#admit(request, { command, args, runId, attemptId });
    } finally {
      this.#admitting.delete(attemptId);
    }
  }

  async #admit(request: AdmitRequest, job: AdmittedJob): Promise<AdmitOutcome> {
    const { runId, attemptId } = job;
    this.#ensureLogDirectory();
    const token = await this.#createClaimedAttempt(request, job);
    if (token === null) return { kind: 'refused', reason: 'run_exists' };
    // `starting` is written before the spawn; the job starts only after its handle is stored, so a
    // crash from here on leaves at most a launcher that reads no order and exits (docs/decisions/0310).
    const starting = await this.#runStore.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'starting' });
    if (starting.kind !== 'advanced') return { kind: 'admitted', runId, attemptId, status: 'claimed' };

    const launched = this.#spawn(request, job, token);
    this.#launchersRunning.add(attemptId);
    // Out of the set before the notice: a notice dropped by a full set leaves the attempt to the backstop.
    void launched.exited.then(() => {
      this.#launchersRunning.delete(attemptId);
      this.#notices.add({ runId, attemptId });
    });
    if (launched.handle === null || launched.pid === null) return this.#withoutHandle(launched, runId, attemptId);
    // Held in the spawn's tick: the launcher cannot have been reaped, so the hold is of this group.
    this.#held?.hold(launched.handle);
    this.#handles.set(attemptId, launched.handle);
    return this.#storeHandle(launched, { runId, attemptId, pid: launched.pid, handle: launched.handle });
  }

  /** Before anything is stored: a directory that cannot be made refuses the run, it never strands one. */
  #ensureLogDirectory(): void {
    if (this.#log !== undefined && !this.#logDirectoryMade) {
      ensureLogDirectory(this.#log.directory);
      this.#logDirectoryMade = true;
    }
  }

  /** The run and its `claimed` attempt with the receipt token's digest; the token, or null when the run exists. */
  async #createClaimedAttempt(request: AdmitRequest, job: AdmittedJob): Promise<string | null> {
    const { runId, attemptId } = job;
    const created = await this.#runStore.createRun({
      runId,
      projectId: request.projectId,
      ...(request.name === undefined ? {} : { name: request.name }),
    });
    if (created.kind === 'exists') return null;
    const token = createReceiptToken();
    const attempt = await this.#runStore.createAttempt({
      runId,
      attemptId,
      receiptTokenDigest: receiptTokenDigest(token),
      ...(request.timeoutMs === undefined ? {} : { timeoutMs: request.timeoutMs }),
      ...(this.#runnerId === undefined ? {} : { runnerId: this.#runnerId }),
      ...(request.leftovers === undefined ? {} : { leftovers: request.leftovers }),
    });
    if (attempt.kind !== 'created')
      throw new PidfenceError(
        `the new run's attempt could not be created (${attempt.kind}).`,
        'ERR_PIDFENCE_ADMISSION_FAILED',
      );
    return token;
  }

  /** The launcher, its order held back until the handle is stored. */
  #spawn(request: AdmitRequest, job: AdmittedJob, token: string): PendingLaunch {
    return spawnLauncher({
      receiptDirectory: this.#receiptDirectory,
      runId: job.runId,
      attemptId: job.attemptId,
      token,
      command: job.command,
      args: job.args,
      ...(request.env === undefined ? {} : { env: request.env }),
      ...(request.stdio === undefined ? {} : { stdio: request.stdio }),
      ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
      ...(request.leftovers === undefined ? {} : { leftovers: request.leftovers }),
      ...(request.leftoverGraceMs === undefined ? {} : { leftoverGraceMs: request.leftoverGraceMs }),
      ...(this.#log === undefined ? {} : { log: this.#log }),
      jobNice: this.#jobNice,
    });
  }

  /** `running` with its handle stored, and only then the order: the job starts once it is provable. */
  async #storeHandle(
    launched: PendingLaunch,
    started: { runId: string; attemptId: string; pid: number; handle: string },
  ): Promise<AdmitOutcome> {
    const { runId, attemptId } = started;
    try {
      const running = await this.#runStore.advanceAttempt({ ...started, from: 'starting', to: 'running' });
      if (running.kind !== 'advanced') {
        // Ended meanwhile (a cancel found it unstarted): the job must not start after all. Its
        // launcher exits at the withdrawal with no job, and no end will name this handle: no hold is kept.
        launched.withdrawOrder();
        this.#held?.release(started.handle);
        this.#handles.delete(attemptId);
        return { kind: 'admitted', runId, attemptId, status: 'starting' };
      }
      launched.sendOrder();
      return { kind: 'admitted', runId, attemptId, status: 'running' };
    } catch (error) {
      // Not known to be stored: the job is not started, and the launcher is stopped as proof.
      launched.withdrawOrder();
      await this.#stopUnstored(started);
      this.#handles.delete(attemptId);
      throw error;
    }
  }

  /**
   * The store lost the handle: the only proof of this process is in memory. Stop it through the
   * verified controller before reporting, so no unprovable process is left behind.
   */
  async #stopUnstored(started: { pid: number; handle: string }): Promise<void> {
    const stopped = await new LocalProcessController(
      this.#held === undefined ? {} : { heldGroups: this.#held },
    ).requestTermination({
      attemptPid: started.pid,
      handle: started.handle,
      graceMs: ADMISSION_UNDO_GRACE_MS,
    });
    // The stop may have ended the launcher before it removed the job's cgroup, and the attempt
    // never got the handle that names it, so no later end or sweep can (docs/decisions/0300).
    if (stopped.exitObserved) removeEndedJobCgroup(started.handle);
    this.#held?.release(started.handle);
  }

  /**
   * No handle. A launcher already gone started nothing: its order is withdrawn and the attempt stays
   * `starting`, which the completion processor ends as never started. Where identities cannot be
   * proved at all (no addon, an old kernel) the job runs unproven, as `run` warns: the attempt is
   * moved to `running` without a handle first, so `starting` without a handle still means no job.
   */
  async #withoutHandle(launched: PendingLaunch, runId: string, attemptId: string): Promise<AdmitOutcome> {
    if (launched.handleStatus !== 'unsupported') {
      launched.withdrawOrder();
      return { kind: 'admitted', runId, attemptId, status: 'starting' };
    }
    const running = await this.#runStore.advanceAttempt({ runId, attemptId, from: 'starting', to: 'running' });
    if (running.kind !== 'advanced') {
      launched.withdrawOrder();
      return { kind: 'admitted', runId, attemptId, status: 'starting' };
    }
    launched.sendOrder();
    return { kind: 'admitted', runId, attemptId, status: 'running' };
  }
}
