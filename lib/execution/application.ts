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
  /** Admission-first drain, then the runner is ended and the stores are closed. Idempotent. */
  drain(): Promise<DrainReport>;
}

export function createExecution(options: ExecutionOptions): ExecutionApplication {
  const receiptDirectory = validateReceiptDirectory(options.receiptDirectory);
  ensureReceiptDirectory(receiptDirectory);
  const profile = profileNamed(options.profile ?? 'standalone', LOCAL_PROFILES);
  const { runStore, repository, executionStore, runnerStore } = options.stores;
  const graceMs = options.graceMs ?? STOP_GRACE_DEFAULT_MS;
  const runner: RunnerSelf = {
    runnerId: `rnr-${randomUUID()}`,
    hostId: resolveHostId(options.env),
    kind: options.runnerKind ?? 'supervise',
  };
  const { runnerId } = runner;
  const heldGroups = new HeldGroups();
  const observer = observerOf(options.observer);
  const controller = new LocalProcessController({ heldGroups, onSignal: (signal) => observer.onSignal(signal) });
  const dispatcher = new Dispatcher({
    repository,
    runStore,
    controllers: new ControllerRegistry([controller]),
    graceMs,
    // One page of the profile is claimed at once; the lease covers its stops one after the other (docs/decisions/0023).
    // A `run` or `cancel` stops one job: its lease covers one stop, so its crash mid-stop delays the
    // next runner by one stop's bound, not a page's (docs/decisions/0192).
    leaseDurationMs: pageLeaseMs(controller.boundMs(graceMs), runner.kind === 'supervise' ? profile.pageSize : 1),
    owner: options.owner ?? runnerId,
    observer,
    ...(options.onStopping === undefined ? {} : { onStopping: options.onStopping }),
  });
  const notices = new CompletionNotices();
  const processor = new CompletionProcessor({
    runStore,
    executionStore,
    receiptDirectory,
    heldGroups,
    observer,
    // Only called once the runner works, after the admission below exists (docs/decisions/0310).
    isAdmitting: (attemptId) => admission.isAdmitting(attemptId),
  });
  const completeFirst = async (ref: AttemptRef): Promise<boolean> => {
    const outcome = await processor.process(ref);
    if (outcome.kind === 'completed') completed(ref, outcome);
    return outcome.kind !== 'active' && outcome.kind !== 'unproven';
  };
  // The stop path of the dispatch cycle and the drain, reporting what it recorded.
  const reported = (target: DispatchTarget, outcome: DispatchOutcome): DispatchOutcome => {
    if (outcome.kind === 'recorded') {
      try {
        options.onStopped?.({ runId: target.runId, attemptId: target.attemptId }, outcome.result);
      } catch {
        // an observer must not break a stop
      }
    }
    return outcome;
  };
  const stops = {
    async dispatch(target: DispatchTarget): Promise<DispatchOutcome> {
      return reported(target, await dispatcher.dispatch(target));
    },
    async dispatchPage(targets: readonly DispatchTarget[]): Promise<DispatchOutcome[]> {
      return dispatcher.dispatchPage(targets, reported);
    },
  };
  const supervisor = new Supervisor({
    repository,
    dispatcher: stops,
    pageSize: profile.pageSize,
    pagesPerCycle: 1,
    runnerId,
    completeFirst,
    observer,
  });
  const log = options.logs === false ? undefined : { directory: logDirectoryBeside(receiptDirectory), ...options.logs };
  const admission = new Admission({
    runStore,
    notices,
    receiptDirectory,
    runnerId,
    heldGroups,
    ...(log === undefined ? {} : { log }),
  });
  const admitted = new Map<string, AttemptRef>();
  const completed = (ref: AttemptRef, outcome: CompletionOutcome): void => {
    if (outcome.kind === 'terminal' && !admitted.has(ref.runId)) return;
    admitted.delete(ref.runId);
    options.onCompleted?.(ref, outcome);
  };
  let registered: Promise<RunnerSelf> | null = null;
  let isOpen = false;
  let wakeListener: WakeListener | null = null;
  const { wakeDirectory } = options;
  // Registered first, then listening: a cancel finds the owner in the store, then its socket.
  const listen = async (): Promise<void> => {
    if (wakeDirectory === undefined) return;
    try {
      wakeListener = await listenForWakeUps(wakeDirectory, runnerId, () => lifecycle.wake());
    } catch (error) {
      // No channel is no failure: the runner works on its cadence, and says why once.
      if (!(error instanceof PidfenceError)) throw error;
      options.onWakeRefused?.(error);
    }
  };
  const open = (): Promise<RunnerSelf> => {
    registered ??= registerRunner(runnerStore, runner)
      .then(listen)
      .then(() => {
        isOpen = true;
        return runner;
      });
    return registered;
  };
  const clearGoneSocket =
    wakeDirectory === undefined ? undefined : (gone: string) => removeStaleWakeSocket(wakeDirectory, gone);
  const adopt = () => adoptGoneRunners(runnerStore, runner, clearGoneSocket);
  const cgroupSweep = new JobCgroupSweep(runStore);
  const lifecycle = new ControlLifecycle({
    profile,
    executionStore,
    processor,
    notices,
    receiptDirectory,
    runnerId,
    deadlines: new DeadlineSource({ executionStore, runStore, pageSize: profile.pageSize, runnerId }),
    dispatch: supervisor,
    watched: () => admitted.values(),
    sweepJobCgroups: () => cgroupSweep.sweepPage(),
    ...(options.adopt === true ? { adopt } : {}),
    ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    ...(options.diagnostics === undefined ? {} : { diagnostics: options.diagnostics }),
    ...(options.onFatal === undefined ? {} : { onFatal: options.onFatal }),
    ...(options.onCycle === undefined ? {} : { onCycle: options.onCycle }),
    ...(options.onStoreFull === undefined ? {} : { onStoreFull: options.onStoreFull }),
    onCompleted: completed,
  });
  const drain = new ExecutionDrain({
    admission,
    lifecycle,
    executionStore,
    runStore,
    dispatcher: stops,
    processor,
    runnerId,
    pageSize: profile.pageSize,
    pages: profile.drainPages,
    concurrency: profile.pageSize,
    closeStorage: async () => {
      heldGroups.releaseAll();
      await wakeListener?.close();
      try {
        if (isOpen) await runnerStore.endRunner(runnerId);
      } catch {
        // Not recorded (a full disk, a store gone): this runner's exit proves it gone all the same.
      } finally {
        await options.stores.close();
      }
    },
    onCompleted: completed,
    // A runner waits for room to record its stops; a `cancel` that took over an orphan leaves the rest to supervise.
    waitOutFullDisk: runner.kind !== 'cancel',
    ...(options.onStoreFull === undefined ? {} : { onStoreFull: options.onStoreFull }),
    ...(options.drainTimeoutMs === undefined ? {} : { timeoutMs: options.drainTimeoutMs }),
  });
  return {
    processor,
    lifecycle,
    notices,
    dispatcher,
    runner,
    open,
    wakeSocket: () => wakeListener?.path ?? null,
    async admit(request) {
      await open();
      const outcome = await admission.admit(request);
      if (outcome.kind === 'admitted')
        admitted.set(outcome.runId, { runId: outcome.runId, attemptId: outcome.attemptId });
      // Its deadline may fall due before the next cadence: the next cycle re-arms the one timer.
      if (outcome.kind === 'admitted') lifecycle.wake();
      return outcome;
    },
    async recover() {
      await open();
      await adopt();
      return recoverExecutions({ executionStore, processor, pageSize: profile.pageSize, runnerId });
    },
    start() {
      if (isOpen) {
        lifecycle.start();
        return;
      }
      // Nothing may be looked at before the runner exists: its pages are "the attempts I own".
      open().then(
        () => lifecycle.start(),
        (error: unknown) => options.onFatal?.(diagnosticCode(error)),
      );
    },
    async stopOrphan(runId) {
      await open();
      return stopOrphanedRun({
        runnerStore,
        runner,
        runId,
        lifecycle,
        processor,
        boundMs: controller.boundMs(graceMs) + LEASE_SETTLE_MARGIN_MS,
        onCompleted: completed,
        watch: (ref) => admitted.set(ref.runId, ref),
      });
    },
    escalate() {
      let sent = 0;
      for (const ref of admitted.values()) if (admission.killGroup(ref.attemptId)) sent += 1;
      return sent;
    },
    drain: () => drain.drain(),
  };
}
