// The raw addon's contract (native/addon.cc), typed once so both sides are checked against it.
// Only lib/native talks to these functions; everything else uses the validated wrappers.

export type RawErrnoResult = { kind: 'error'; errno: string };

export type RawStatResult =
  | {
      kind: 'ok';
      pid: number;
      state: string;
      ppid: number;
      pgid: number;
      sid: number;
      startTicks: string;
    }
  | { kind: 'gone' }
  | RawErrnoResult;

export type RawBootIdResult = { kind: 'ok'; bootId: string } | RawErrnoResult;

export type RawBootClockResult = { kind: 'ok'; ms: number } | RawErrnoResult;

export type RawMismatchReason = 'boot_id' | 'start_ticks' | 'pidfs_ino' | 'not_group_leader';
export type RawSignalMode = 'pidfd' | 'pidfd-process-group' | 'pgid-after-pidfd-check';

export type RawVerdict =
  | { kind: 'signalled'; mode: RawSignalMode }
  | { kind: 'already_exited' }
  | { kind: 'identity_mismatch'; reason: RawMismatchReason }
  | { kind: 'unsupported' }
  | { kind: 'error'; errno: string };

export type RawCaptureResult =
  | {
      kind: 'verified';
      pid: number;
      bootId: string;
      startTicks: string;
      pgid: number;
      pidfsIno?: string;
    }
  | Exclude<RawVerdict, { kind: 'signalled' }>;

export type RawWatchResult = { kind: 'watching'; id: number } | Exclude<RawVerdict, { kind: 'signalled' }>;

export interface RawCapabilities {
  pidfdOpen: boolean;
  pidfdSendSignal: boolean;
  processGroupFlag: boolean;
  pidfdGetInfo: boolean;
  pidfsIdentity: boolean;
}

export interface RawBuildInfo {
  sourceDigest: string;
  napiVersion: number;
  arch: string;
}

export type RawCgroupResult = { kind: 'ok' | 'gone' | 'busy' | 'unsupported' } | RawErrnoResult;
export type RawCgroupRead =
  { kind: 'ok'; populated: boolean; frozen: boolean } | { kind: 'gone' | 'busy' | 'unsupported' } | RawErrnoResult;
export type RawCgroupSignal = RawCgroupResult & { signalled: number; proof: CgroupMemberProof };
/** How members were proved to be in the cgroup (docs/decisions/0180). */
export type CgroupMemberProof = 'pidfd-info' | 'listing';
export type RawCgroupWatch = { kind: 'watching'; id: number } | Exclude<RawCgroupResult, { kind: 'ok' }>;

export interface NativeAddon {
  setErrorClass(errorClass: new (message: string, code: string) => Error): void;
  readProcessStat(pid: number): RawStatResult;
  bootId(): RawBootIdResult;
  bootClockMs(): RawBootClockResult;
  captureIdentity(pid: number): RawCaptureResult;
  capabilities(): RawCapabilities;
  signalVerified(
    pid: number,
    bootId: string,
    startTicks: string,
    pidfsIno: string,
    signo: number,
    group: boolean,
    forceGroupFallback: boolean,
  ): number; // packed verdict, decoded by verdict.ts

  exitWatchStart(
    pid: number,
    bootId: string,
    startTicks: string,
    pidfsIno: string,
    callback: (kind: 'exited' | 'error') => void,
    hold: boolean,
  ): RawWatchResult;
  exitWatchGroupSignal(id: number, signo: number): RawVerdict;
  exitWatchCancel(id: number): boolean;
  cgroupRead(subtree: string, id: string): RawCgroupRead;
  cgroupFreeze(subtree: string, id: string, frozen: boolean): RawCgroupResult;
  cgroupSignalMembers(subtree: string, id: string, signo: number, proof: 'auto' | 'listing'): RawCgroupSignal;
  cgroupKill(subtree: string, id: string): RawCgroupResult;
  cgroupRemove(subtree: string, id: string): RawCgroupResult;
  cgroupLearnName(subtree: string, id: string, name: string): RawCgroupResult;
  cgroupWatchStart(subtree: string, id: string, callback: (kind: 'changed' | 'error') => void): RawCgroupWatch;
  buildInfo(): RawBuildInfo;
}
