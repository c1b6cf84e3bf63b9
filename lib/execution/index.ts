// pidfence/execution: the local execution lifecycle (design/execution): admission and the launcher,
// completion receipts and the one completion processor, deadlines, the one control timer, the
// admission-first shutdown drain and startup recovery. Concrete stores are wired by the caller.
export { adoptGoneRunners, stopOrphanedRun, type OrphanStop } from './adoption';
export { Admission, ADMISSION_UNDO_GRACE_MS, type AdmitOutcome, type AdmitRequest } from './admission';
export {
  createExecution,
  STOP_GRACE_DEFAULT_MS,
  type ExecutionApplication,
  type ExecutionOptions,
  type ExecutionStores,
} from './application';
export {
  CompletionProcessor,
  statusForReceipt,
  type CompletionOutcome,
  type CompletionProcessorOptions,
} from './completion-processor';
export {
  ControlLifecycle,
  CYCLE_FAILURE_LIMIT,
  cleanupJournalPage,
  type ControlCycleReport,
  type ControlLifecycleOptions,
} from './control-lifecycle';
export { DeadlineSource, type DeadlinePass } from './deadlines';
export { ExecutionDrain, DRAIN_TIMEOUT_DEFAULT_MS, type DrainReport } from './drain';
export {
  LEFTOVER_GRACE_DEFAULT_MS,
  launchAttempt,
  spawnLauncher,
  type LaunchRequest,
  type Launched,
  type PendingLaunch,
} from './launcher';
export {
  JOB_NICE_MAX,
  LEFTOVER_POLICIES,
  LEFTOVER_POLICY_DEFAULT,
  validateJobNice,
  type LeftoverPolicy,
} from './launch-order';
export { CompletionNotices, NOTICES_MAX, type AttemptRef } from './notices';
export {
  RECEIPT_CALLBACK_SEQ,
  createReceiptToken,
  parseReceipt,
  receiptPaths,
  readReceipt,
  receiptTokenDigest,
  writeReceiptAtomic,
  type CompletionReceipt,
  type CompletionReceiptV2,
} from './receipts';
export { HOST_ID_ENV, resolveHostId } from './host-id';
export { registerRunner, runnerGoneProof, type RunnerSelf } from './runner';
export { recoverExecutions, RECOVERY_PAGES_MAX, type RecoveryReport } from './recovery';
export { START_FAILURE_STATUS, startFailureOf, type StartFailure } from './start-failure';
