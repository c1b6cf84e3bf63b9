// pidfence/process (also published as the deprecated alias pidfence/controller): durable process handles, group-leader spawn, and the local controller.
export {
  HANDLE_MAX_BYTES,
  HANDLE_PLATFORM,
  HANDLE_VERSION,
  formatHandle,
  handleExpectedIdentity,
  handleFromIdentity,
  handlePlatform,
  PLATFORM_PATTERN,
  parseHandle,
  type DurableProcessHandle,
} from './durable-handle';
export { ownPidNamespace, pidNamespaceMatches } from './pid-namespace';
export {
  CGROUP_ENV,
  CGROUP_OFF,
  createJobCgroup,
  discardJobCgroup,
  jobCgroupNames,
  removeEndedJobCgroup,
  resolveCgroupSubtree,
  type Containment,
} from './job-cgroup';
export { groupLiveness, type GroupLiveness } from './group-liveness';
export { HeldGroups, type HoldResult } from './held-groups';
export {
  spawnGroupLeader,
  type GroupLeaderSpawnOptions,
  type HandleStatus,
  type JobChild,
  type JobEventSource,
  type JobExit,
  type JobReadable,
  type JobStdioEntry,
  type JobWritable,
  type SignalName,
  type SpawnedJob,
} from './spawn';
export {
  CONTROL_OVERHEAD_MS,
  GRACE_MS_MAX,
  KILL_CONFIRM_MS,
  MEMBER_CHECK_MS,
  LocalProcessController,
  type LocalProcessControllerOptions,
  type TerminationOutcome,
  type TerminationRequest,
  type TerminationResult,
  type VerifiedSignal,
} from './local-process-controller';
