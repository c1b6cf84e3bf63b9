// The composition root of the local execution lifecycle (design/execution §1, §4-5): one admission, one
// completion processor, one control lifecycle with its one timer (deadlines, dispatch, receipts,
// cleanup), startup recovery and the admission-first drain, over the stores the caller opened.
// The application is one runner (docs/decisions/0070): it acts only on the attempts it owns, and
// takes over those of runners of its host that are proved gone.
import { randomUUID } from 'node:crypto';

import type { Environment } from '../base/environment';
import { PidfenceError } from '../base/errors';
import {
  ControllerRegistry,
  type DiagnosticsCallback,
  Dispatcher,
  type DispatchObserver,
  type DispatchOutcome,
  type DispatchTarget,
  LEASE_SETTLE_MARGIN_MS,
  pageLeaseMs,
  LOCAL_PROFILES,
  observerOf,
  type Profile,
  profile as profileNamed,
  Supervisor,
} from '../dispatch/index';
import { diagnosticCode } from '../dispatch/diagnostics';
import { HeldGroups, LocalProcessController } from '../process/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { ExecutionStore } from '../store/execution-store';
import type { RunStore } from '../store/run-store';
import type { RunnerStore } from '../store/runner-store';
import type { RunnerKind } from '../contract/index';
import { adoptGoneRunners, stopOrphanedRun, type OrphanStop } from './adoption';
import { Admission, type AdmitOutcome, type AdmitRequest } from './admission';
import { JobCgroupSweep } from './cgroup-sweep';
import { CompletionProcessor, type CompletionOutcome } from './completion-processor';
import { ControlLifecycle, type ControlCycleReport } from './control-lifecycle';
import { DeadlineSource } from './deadlines';
import { ExecutionDrain, type DrainReport } from './drain';
import { resolveHostId } from './host-id';
import { CompletionNotices, type AttemptRef } from './notices';
import { logDirectoryBeside, type JobLogSettings } from './job-log';
import { validateJobNice } from './launch-order';
import { ensureReceiptDirectory, validateReceiptDirectory } from './receipts';
import { recoverExecutions, type RecoveryReport } from './recovery';
import { registerRunner, type RunnerSelf } from './runner';
import { listenForWakeUps, removeStaleWakeSocket, type WakeListener } from './wake-channel';

/** TERM grace before KILL when a job is stopped (cancel, timeout, shutdown). */
export const STOP_GRACE_DEFAULT_MS = 5_000;

export interface ExecutionStores {
  readonly runStore: RunStore;
  readonly repository: DispatchRepository;
  readonly executionStore: ExecutionStore;
  readonly runnerStore: RunnerStore;
  close(): Promise<void> | void;
}

export interface ExecutionOptions {
  readonly stores: ExecutionStores;
  /** Absolute directory of the completion receipts (created 0700). */
  readonly receiptDirectory: string;
  /**
   * Where each run's stdout and stderr are kept, and how much (docs/decisions/0250). Default: in
   * `<receiptDirectory>.logs`, 10 MiB a file, 2 rotated files; `false`: not kept.
   */
  readonly logs?: Partial<JobLogSettings> | false;
  /**
   * How much nicer than this runner its jobs run (docs/decisions/0441): 0 (the default) keeps the
   * runner's priority; more lets the jobs yield the CPU to other work on the host.
   */
  readonly jobNice?: number;
  /**
   * Directory of the runners' wake-up sockets (created 0700; docs/decisions/0175): a committed
   * cancel wakes this runner through it. Omitted: no channel, the cadence alone.
   */
  readonly wakeDirectory?: string;
  /** The wake-up channel was refused (another user's directory, a live socket, a long path): the cadence alone then. */
  readonly onWakeRefused?: (error: PidfenceError) => void;
  /** `edge` or `standalone` (docs/decisions/0032). */
  readonly profile?: 'edge' | 'standalone';
  readonly graceMs?: number;
  /** What kind of runner this application is (default `supervise`). */
  readonly runnerKind?: RunnerKind;
  /** Take over, every cleanup period, the attempts of runners of this host proved gone (a `supervise`). */
  readonly adopt?: boolean;
  /** Where the host id comes from (PIDFENCE_HOST_ID); default process.env. */
  readonly env?: Environment;
  readonly drainTimeoutMs?: number;
  readonly keepAlive?: boolean;
  readonly diagnostics?: DiagnosticsCallback;
  readonly onFatal?: (code: string) => void;
  readonly onCycle?: (report: ControlCycleReport) => void;
  readonly onCompleted?: (ref: AttemptRef, outcome: CompletionOutcome) => void;
  /** Every stop this runner recorded (cancel, timeout, shutdown): run id and result, low-sensitivity. */
  readonly onStopped?: (ref: AttemptRef, result: string) => void;
  /** A stop of this runner is about to send TERM and wait out its grace (the dispatcher's onStopping). */
  readonly onStopping?: (ref: AttemptRef) => void;
  /** Dispatch lease owner id (default: host/pid/random). */
  readonly owner?: string;
  /** Told of claims, results, cycles, signals and cancel-to-exit times (metrics, docs/decisions/0110). */
  readonly observer?: Partial<DispatchObserver>;
  /**
   * The store's disk is full (docs/decisions/0191): told once per full spell of the lifecycle and
   * once per drain; both go on by themselves (a runner's drain waits for room to record its stops).
   */
  readonly onStoreFull?: (error: PidfenceError) => void;
}

export interface ExecutionApplication {
  readonly processor: CompletionProcessor;
  readonly lifecycle: ControlLifecycle;
  readonly notices: CompletionNotices;
  readonly dispatcher: Dispatcher;
  /** This runner: its id and host (registered by open()). */
  readonly runner: RunnerSelf;
  /** This runner's wake-up socket once open() listens on it; null without a channel. */
  readonly wakeSocket: () => string | null;
  /** Registers this runner with the store; admit() and recover() call it. Idempotent. */
  open(): Promise<RunnerSelf>;
  admit(request: AdmitRequest): Promise<AdmitOutcome>;
  /** Startup recovery: adopts the attempts of gone runners of this host, then converges its own. */
  recover(): Promise<RecoveryReport>;
  /** Starts the one timer once this runner is registered (at once when it is). */
  start(): void;
  /**
   * A run whose runner is proved gone: take its attempt over and stop it through the claim/dispatch
   * path (its cancel intent must exist), waiting at most one stop's bound for it to converge.
   */
  stopOrphan(runId: string): Promise<OrphanStop>;
  /** A second interrupt: KILL every admitted job's group through the held pidfd. The count sent. */
  escalate(): number;
  /** How many admitted attempts' handles this runner keeps for escalate(): only those not yet seen ended. */
  rememberedHandleCount(): number;
  /** Admission-first drain, then the runner is ended and the stores are closed. Idempotent. */
  drain(): Promise<DrainReport>;
}

export function createExecution(options: ExecutionOptions): ExecutionApplication {
  const basis = executionBasis(options);
  const dispatch = dispatchSide(basis);
  const completion = completionSide(basis);
  const watched = watchedRuns(options.onCompleted, (attemptId) => completion.admission.forget(attemptId));
  const supervisor = supervisorOf(basis, dispatch.stops, completeFirstWith(completion.processor, watched.completed));
  const adopt = goneRunnerAdoption(basis);
  const lifecycle = controlLifecycleOf(basis, { ...completion, supervisor, watched, adopt });
  const registration = runnerRegistration(basis, () => lifecycle.wake());
  const drain = executionDrainOf(basis, { ...completion, stops: dispatch.stops, lifecycle, registration, watched });
  return executionFacade(basis, { ...dispatch, ...completion, watched, adopt, lifecycle, registration, drain });
}

/** What every part of one runner shares: its checked settings, its identity, its held groups and observer. */
interface ExecutionBasis {
  readonly options: ExecutionOptions;
  readonly stores: ExecutionStores;
  readonly receiptDirectory: string;
  readonly profile: Profile;
  readonly graceMs: number;
  readonly runner: RunnerSelf;
  readonly heldGroups: HeldGroups;
  readonly observer: DispatchObserver;
}

function executionBasis(options: ExecutionOptions): ExecutionBasis {
  const receiptDirectory = validateReceiptDirectory(options.receiptDirectory);
  if (options.jobNice !== undefined) validateJobNice(options.jobNice); // refused before anything is made
  ensureReceiptDirectory(receiptDirectory);
  const profile = profileNamed(options.profile ?? 'standalone', LOCAL_PROFILES);
  const runner: RunnerSelf = {
    runnerId: `rnr-${randomUUID()}`,
    hostId: resolveHostId(options.env),
    kind: options.runnerKind ?? 'supervise',
  };
  return {
    options,
    stores: options.stores,
    receiptDirectory,
    profile,
    graceMs: options.graceMs ?? STOP_GRACE_DEFAULT_MS,
    runner,
    heldGroups: new HeldGroups(),
    observer: observerOf(options.observer),
  };
}

/** The stop path of the dispatch cycle and the drain: the dispatcher, reporting what it recorded. */
interface StopPath {
  dispatch(target: DispatchTarget): Promise<DispatchOutcome>;
  dispatchPage(targets: readonly DispatchTarget[]): Promise<DispatchOutcome[]>;
}

interface DispatchSide {
  readonly controller: LocalProcessController;
  readonly dispatcher: Dispatcher;
  readonly stops: StopPath;
}

function dispatchSide(basis: ExecutionBasis): DispatchSide {
  const { options, stores, profile, graceMs, runner, heldGroups, observer } = basis;
  const controller = new LocalProcessController({ heldGroups, onSignal: (signal) => observer.onSignal(signal) });
  const dispatcher = new Dispatcher({
    repository: stores.repository,
    runStore: stores.runStore,
    controllers: new ControllerRegistry([controller]),
    graceMs,
    // One page of the profile is claimed at once; the lease covers its stops one after the other (docs/decisions/0023).
    // A `run` or `cancel` stops one job: its lease covers one stop, so its crash mid-stop delays the
    // next runner by one stop's bound, not a page's (docs/decisions/0192).
    leaseDurationMs: pageLeaseMs(controller.boundMs(graceMs), runner.kind === 'supervise' ? profile.pageSize : 1),
    owner: options.owner ?? runner.runnerId,
    observer,
    ...(options.onStopping === undefined ? {} : { onStopping: options.onStopping }),
  });
  return { controller, dispatcher, stops: reportingStops(dispatcher, options.onStopped) };
}

function reportingStops(dispatcher: Dispatcher, onStopped: ExecutionOptions['onStopped']): StopPath {
  const reported = (target: DispatchTarget, outcome: DispatchOutcome): DispatchOutcome => {
    if (outcome.kind === 'recorded') {
      try {
        onStopped?.({ runId: target.runId, attemptId: target.attemptId }, outcome.result);
      } catch {
        // an observer must not break a stop
      }
    }
    return outcome;
  };
  return {
    async dispatch(target) {
      return reported(target, await dispatcher.dispatch(target));
    },
    async dispatchPage(targets) {
      return dispatcher.dispatchPage(targets, reported);
    },
  };
}

interface CompletionSide {
  readonly notices: CompletionNotices;
  readonly processor: CompletionProcessor;
  readonly admission: Admission;
}

function completionSide(basis: ExecutionBasis): CompletionSide {
  const { options, stores, receiptDirectory, runner, heldGroups, observer } = basis;
  const { runStore } = stores;
  const notices = new CompletionNotices();
  const processor = new CompletionProcessor({
    runStore,
    executionStore: stores.executionStore,
    receiptDirectory,
    heldGroups,
    observer,
    // Only called once the runner works, after the admission below exists (docs/decisions/0310).
    isAdmitting: (attemptId) => admission.isAdmitting(attemptId),
  });
  const log = options.logs === false ? undefined : { directory: logDirectoryBeside(receiptDirectory), ...options.logs };
  const admission = new Admission({
    runStore,
    notices,
    receiptDirectory,
    runnerId: runner.runnerId,
    heldGroups,
    ...(log === undefined ? {} : { log }),
    ...(options.jobNice === undefined ? {} : { jobNice: options.jobNice }),
  });
  return { notices, processor, admission };
}

/**
 * The runs this runner admitted or took over, by run id: watched to completion, killed on escalation.
 * At its end an attempt is forgotten by the admission too, which kept its handle only for escalation.
 */
interface WatchedRuns {
  readonly admitted: Map<string, AttemptRef>;
  readonly completed: (ref: AttemptRef, outcome: CompletionOutcome) => void;
}

function watchedRuns(onCompleted: ExecutionOptions['onCompleted'], forget: (attemptId: string) => void): WatchedRuns {
  const admitted = new Map<string, AttemptRef>();
  const completed = (ref: AttemptRef, outcome: CompletionOutcome): void => {
    forget(ref.attemptId);
    if (outcome.kind === 'terminal' && !admitted.has(ref.runId)) return;
    admitted.delete(ref.runId);
    onCompleted?.(ref, outcome);
  };
  return { admitted, completed };
}

/** The supervisor's completeFirst: true once the attempt needs no stop (it completed or is gone). */
function completeFirstWith(
  processor: CompletionProcessor,
  completed: WatchedRuns['completed'],
): (ref: AttemptRef) => Promise<boolean> {
  return async (ref) => {
    const outcome = await processor.process(ref);
    if (outcome.kind === 'completed') completed(ref, outcome);
    return outcome.kind !== 'active' && outcome.kind !== 'unproven';
  };
}

function supervisorOf(
  basis: ExecutionBasis,
  stops: StopPath,
  completeFirst: (ref: AttemptRef) => Promise<boolean>,
): Supervisor {
  return new Supervisor({
    repository: basis.stores.repository,
    dispatcher: stops,
    pageSize: basis.profile.pageSize,
    pagesPerCycle: 1,
    runnerId: basis.runner.runnerId,
    completeFirst,
    observer: basis.observer,
  });
}

/** Takes over the attempts of the runners of this host proved gone, clearing their wake-up sockets; how many. */
type Adoption = () => Promise<number>;

function goneRunnerAdoption(basis: ExecutionBasis): Adoption {
  const { wakeDirectory } = basis.options;
  const clearGoneSocket =
    wakeDirectory === undefined ? undefined : (gone: string) => removeStaleWakeSocket(wakeDirectory, gone);
  return () => adoptGoneRunners(basis.stores.runnerStore, basis.runner, clearGoneSocket);
}

interface LifecycleParts extends CompletionSide {
  readonly supervisor: Supervisor;
  readonly watched: WatchedRuns;
  readonly adopt: Adoption;
}

function controlLifecycleOf(basis: ExecutionBasis, parts: LifecycleParts): ControlLifecycle {
  const { options, stores, profile, receiptDirectory } = basis;
  const { executionStore, runStore } = stores;
  const { runnerId } = basis.runner;
  const cgroupSweep = new JobCgroupSweep(runStore);
  return new ControlLifecycle({
    profile,
    executionStore,
    processor: parts.processor,
    notices: parts.notices,
    receiptDirectory,
    runnerId,
    deadlines: new DeadlineSource({ executionStore, runStore, pageSize: profile.pageSize, runnerId }),
    dispatch: parts.supervisor,
    watched: () => parts.watched.admitted.values(),
    endWillBeNoticed: (attemptId) => parts.admission.launcherRunning(attemptId),
    sweepJobCgroups: () => cgroupSweep.sweepPage(),
    ...(options.adopt === true ? { adopt: parts.adopt } : {}),
    ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    ...(options.diagnostics === undefined ? {} : { diagnostics: options.diagnostics }),
    ...(options.onFatal === undefined ? {} : { onFatal: options.onFatal }),
    ...(options.onCycle === undefined ? {} : { onCycle: options.onCycle }),
    ...(options.onStoreFull === undefined ? {} : { onStoreFull: options.onStoreFull }),
    onCompleted: parts.watched.completed,
  });
}

/** This runner in the store, then its wake-up socket: open() does both once. */
interface RunnerRegistration {
  open(): Promise<RunnerSelf>;
  isOpen(): boolean;
  wakeSocket(): string | null;
  closeWakeChannel(): Promise<void>;
}

function runnerRegistration(basis: ExecutionBasis, wake: () => void): RunnerRegistration {
  const { options, runner } = basis;
  const { wakeDirectory } = options;
  let registered: Promise<RunnerSelf> | null = null;
  let isOpen = false;
  let wakeListener: WakeListener | null = null;
  // Registered first, then listening: a cancel finds the owner in the store, then its socket.
  const listen = async (): Promise<void> => {
    if (wakeDirectory === undefined) return;
    try {
      wakeListener = await listenForWakeUps(wakeDirectory, runner.runnerId, wake);
    } catch (error) {
      // No channel is no failure: the runner works on its cadence, and says why once.
      if (!(error instanceof PidfenceError)) throw error;
      options.onWakeRefused?.(error);
    }
  };
  return {
    open() {
      registered ??= registerRunner(basis.stores.runnerStore, runner)
        .then(listen)
        .then(() => {
          isOpen = true;
          return runner;
        });
      return registered;
    },
    isOpen: () => isOpen,
    wakeSocket: () => wakeListener?.path ?? null,
    closeWakeChannel: async () => {
      await wakeListener?.close();
    },
  };
}

interface DrainParts extends CompletionSide {
  readonly stops: StopPath;
  readonly lifecycle: ControlLifecycle;
  readonly registration: RunnerRegistration;
  readonly watched: WatchedRuns;
}

function executionDrainOf(basis: ExecutionBasis, parts: DrainParts): ExecutionDrain {
  const { options, stores, profile, runner } = basis;
  return new ExecutionDrain({
    admission: parts.admission,
    lifecycle: parts.lifecycle,
    executionStore: stores.executionStore,
    runStore: stores.runStore,
    dispatcher: parts.stops,
    processor: parts.processor,
    runnerId: runner.runnerId,
    pageSize: profile.pageSize,
    pages: profile.drainPages,
    concurrency: profile.pageSize,
    closeStorage: () => closeRunnerStorage(basis, parts.registration),
    onCompleted: parts.watched.completed,
    // A runner waits for room to record its stops; a `cancel` that took over an orphan leaves the rest to supervise.
    waitOutFullDisk: runner.kind !== 'cancel',
    ...(options.onStoreFull === undefined ? {} : { onStoreFull: options.onStoreFull }),
    ...(options.drainTimeoutMs === undefined ? {} : { timeoutMs: options.drainTimeoutMs }),
  });
}

/** The drain's last step: held groups released, the wake-up socket closed, the runner ended, the stores closed. */
async function closeRunnerStorage(basis: ExecutionBasis, registration: RunnerRegistration): Promise<void> {
  basis.heldGroups.releaseAll();
  await registration.closeWakeChannel();
  try {
    if (registration.isOpen()) await basis.stores.runnerStore.endRunner(basis.runner.runnerId);
  } catch {
    // Not recorded (a full disk, a store gone): this runner's exit proves it gone all the same.
  } finally {
    await basis.stores.close();
  }
}

/** Every part of one runner, for the facade createExecution returns. */
interface ExecutionParts extends DispatchSide, CompletionSide {
  readonly watched: WatchedRuns;
  readonly adopt: Adoption;
  readonly lifecycle: ControlLifecycle;
  readonly registration: RunnerRegistration;
  readonly drain: ExecutionDrain;
}

function executionFacade(basis: ExecutionBasis, parts: ExecutionParts): ExecutionApplication {
  const { processor, lifecycle, registration, admission, watched } = parts;
  const { open } = registration;
  return {
    processor,
    lifecycle,
    notices: parts.notices,
    dispatcher: parts.dispatcher,
    runner: basis.runner,
    open,
    wakeSocket: registration.wakeSocket,
    async admit(request) {
      await open();
      const outcome = await admission.admit(request);
      if (outcome.kind === 'admitted')
        watched.admitted.set(outcome.runId, { runId: outcome.runId, attemptId: outcome.attemptId });
      // Its deadline may fall due before the next cadence: the next cycle re-arms the one timer.
      if (outcome.kind === 'admitted') lifecycle.wake();
      return outcome;
    },
    async recover() {
      await open();
      await parts.adopt();
      const { executionStore } = basis.stores;
      const { runnerId } = basis.runner;
      return recoverExecutions({ executionStore, processor, pageSize: basis.profile.pageSize, runnerId });
    },
    start: () => startLifecycle(basis, registration, lifecycle),
    stopOrphan: (runId) => stopOrphanOf(basis, parts, runId),
    escalate() {
      let sent = 0;
      for (const ref of watched.admitted.values()) if (admission.killGroup(ref.attemptId)) sent += 1;
      return sent;
    },
    rememberedHandleCount: () => admission.rememberedHandleCount(),
    drain: () => parts.drain.drain(),
  };
}

function startLifecycle(basis: ExecutionBasis, registration: RunnerRegistration, lifecycle: ControlLifecycle): void {
  if (registration.isOpen()) {
    lifecycle.start();
    return;
  }
  // Nothing may be looked at before the runner exists: its pages are "the attempts I own".
  registration.open().then(
    () => lifecycle.start(),
    (error: unknown) => basis.options.onFatal?.(diagnosticCode(error)),
  );
}

async function stopOrphanOf(basis: ExecutionBasis, parts: ExecutionParts, runId: string): Promise<OrphanStop> {
  await parts.registration.open();
  return stopOrphanedRun({
    runnerStore: basis.stores.runnerStore,
    runner: basis.runner,
    runId,
    lifecycle: parts.lifecycle,
    processor: parts.processor,
    boundMs: parts.controller.boundMs(basis.graceMs) + LEASE_SETTLE_MARGIN_MS,
    onCompleted: parts.watched.completed,
    watch: (ref) => parts.watched.admitted.set(ref.runId, ref),
  });
}
