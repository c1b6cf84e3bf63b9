// pidfence/dispatch: Dispatcher, bounded Supervisor and LifecycleRunner (design/dispatch §2.3-2.6).
// Imports process, contract and the store interfaces only; a concrete store is wired by the caller.
export { ControllerRegistry, validatePlatform, type TerminationController } from './controller-registry';
export { handlePlatform } from '../process/index';
export type { TerminationOutcome, TerminationRequest, TerminationResult } from './controller-registry';
export {
  CONTROLLER_ANSWER_INVALID,
  Dispatcher,
  LEASE_SETTLE_MARGIN_MS,
  STOP_CONCURRENCY_DEFAULT,
  defaultOwnerId,
  pageLeaseMs,
  type DispatchFence,
  type DispatchOutcome,
  type DispatchTarget,
  type DispatcherOptions,
  type DispatcherTestHooks,
} from './dispatcher';
export { Supervisor, type CycleReport, type SupervisorOptions } from './supervisor';
export {
  CADENCE_MAX_MS,
  CADENCE_MIN_MS,
  LifecycleRunner,
  STOP_TIMEOUT_DEFAULT_MS,
  STOP_TIMEOUT_MAX_MS,
  type LifecycleRunnerOptions,
  type RunnerState,
  type StopResult,
} from './lifecycle-runner';
export {
  DIAGNOSTICS_PER_MINUTE_DEFAULT,
  DIAGNOSTICS_PER_MINUTE_MAX,
  DIAGNOSTICS_SUPPRESSED_CODE,
  DIAGNOSTICS_UNKNOWN_CODE,
  DIAGNOSTICS_WINDOW_MS,
  type DiagnosticRecord,
  type DiagnosticsCallback,
  type FailureFacts,
} from './diagnostics';
export { LOCAL_PROFILES, PROFILES, profile, type DispatchProfile, type Profile, type ProfileName } from './profiles';
export {
  CLAIM_KINDS,
  NO_OBSERVER,
  STOP_MODES,
  observerOf,
  type ClaimKind,
  type DispatchObserver,
  type VerifiedSignal,
} from './observer';
export { RunnerDrainingError, SupervisorCycleError, type SupervisorCycleFailure } from './errors';
