// The composition root of the local execution lifecycle (ADR-0072 §1, §4-5): one admission, one
// completion processor, one control lifecycle with its one timer (deadlines, dispatch, receipts,
// cleanup), startup recovery and the admission-first drain, over the stores the caller opened.
import { ControllerRegistry, Dispatcher, LEASE_SETTLE_MARGIN_MS, Supervisor, type DiagnosticsCallback } from '../dispatch/index';
import { LocalProcessController } from '../process/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { ExecutionStore } from '../store/execution-store';
import type { RunStore } from '../store/run-store';
import { Admission, type AdmitOutcome, type AdmitRequest } from './admission';
import { CompletionProcessor, type CompletionOutcome } from './completion-processor';
import { ControlLifecycle, type ControlCycleReport } from './control-lifecycle';
import { DeadlineSource } from './deadlines';
import { ExecutionDrain, type DrainReport } from './drain';
import { CompletionNotices, type AttemptRef } from './notices';
import { executionProfile, type ExecutionProfileName } from './profiles';
import { receiptDirectoryEnsure, validateReceiptDirectory } from './receipts';
import { recoverExecutions, type RecoveryReport } from './recovery';

/** TERM grace before KILL when a job is stopped (cancel, timeout, shutdown). */
export const STOP_GRACE_DEFAULT_MS = 5_000;

export interface ExecutionStores {
  readonly runStore: RunStore;
  readonly repository: DispatchRepository;
  readonly executionStore: ExecutionStore;
  close(): Promise<void> | void;
}

export interface ExecutionOptions {
  readonly stores: ExecutionStores;
  /** Absolute directory of the completion receipts (created 0700). */
  readonly receiptDirectory: string;
  readonly profile?: ExecutionProfileName;
  readonly graceMs?: number;
  /** `all`: the drain stops every active attempt of the store (a host's runner); `admitted`: only this application's. */
  readonly drainScope?: 'all' | 'admitted';
  readonly drainTimeoutMs?: number;
  readonly keepAlive?: boolean;
  readonly diagnostics?: DiagnosticsCallback;
  readonly onFatal?: (code: string) => void;
  readonly onCycle?: (report: ControlCycleReport) => void;
  readonly onCompleted?: (ref: AttemptRef, outcome: CompletionOutcome) => void;
  /** Dispatch lease owner id (default: host/pid/random). */
  readonly owner?: string;
}

export interface ExecutionApplication {
  readonly processor: CompletionProcessor;
  readonly lifecycle: ControlLifecycle;
  readonly notices: CompletionNotices;
  readonly dispatcher: Dispatcher;
  admit(request: AdmitRequest): Promise<AdmitOutcome>;
  /** Startup recovery; call before start() and before admitting. */
  recover(): Promise<RecoveryReport>;
  start(): void;
  /** Admission-first drain, then the stores are closed. Idempotent. */
  drain(): Promise<DrainReport>;
}

export function createExecution(options: ExecutionOptions): ExecutionApplication {
  const receiptDirectory = validateReceiptDirectory(options.receiptDirectory);
  receiptDirectoryEnsure(receiptDirectory);
  const profile = executionProfile(options.profile ?? 'standalone');
  const { runStore, repository, executionStore } = options.stores;
  const graceMs = options.graceMs ?? STOP_GRACE_DEFAULT_MS;
  const controller = new LocalProcessController();
  const dispatcher = new Dispatcher({
    repository, runStore, controllers: new ControllerRegistry([controller]), graceMs,
    leaseDurationMs: controller.boundMs(graceMs) + LEASE_SETTLE_MARGIN_MS + 1_000,
    ...(options.owner === undefined ? {} : { owner: options.owner }),
  });
  const supervisor = new Supervisor({ repository, dispatcher, pageSize: profile.controlPage, pagesPerCycle: 1 });
  const notices = new CompletionNotices();
  const processor = new CompletionProcessor({ runStore, executionStore, receiptDirectory });
  const admission = new Admission({ runStore, notices, receiptDirectory });
  const admitted = new Map<string, AttemptRef>();
  const completed = (ref: AttemptRef, outcome: CompletionOutcome): void => {
    admitted.delete(ref.runId);
    options.onCompleted?.(ref, outcome);
  };
  const lifecycle = new ControlLifecycle({
    profile, executionStore, processor, notices, receiptDirectory,
    deadlines: new DeadlineSource({ executionStore, runStore, pageSize: profile.controlPage }),
    dispatch: supervisor,
    ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
    ...(options.diagnostics === undefined ? {} : { diagnostics: options.diagnostics }),
    ...(options.onFatal === undefined ? {} : { onFatal: options.onFatal }),
    ...(options.onCycle === undefined ? {} : { onCycle: options.onCycle }),
    onCompleted: completed,
  });
  const drain = new ExecutionDrain({
    admission, lifecycle, executionStore, runStore, dispatcher, processor,
    pageSize: profile.controlPage, pages: profile.drainPages,
    inScope: options.drainScope === 'admitted' ? (ref) => admitted.has(ref.runId) : () => true,
    closeStorage: () => options.stores.close(),
    onCompleted: completed,
    ...(options.drainTimeoutMs === undefined ? {} : { timeoutMs: options.drainTimeoutMs }),
  });
  return {
    processor, lifecycle, notices, dispatcher,
    async admit(request) {
      const outcome = await admission.admit(request);
      if (outcome.kind === 'admitted') admitted.set(outcome.runId, { runId: outcome.runId, attemptId: outcome.attemptId });
      return outcome;
    },
    recover: () => recoverExecutions({ executionStore, processor, pageSize: profile.controlPage }),
    start: () => lifecycle.start(),
    drain: () => drain.drain(),
  };
}
