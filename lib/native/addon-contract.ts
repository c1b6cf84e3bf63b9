// The raw addon's contract (native/addon.cc), typed once so both sides are checked against it.
// Only lib/native talks to these functions; everything else uses the validated wrappers.

export type RawErrnoResult = { status: 'error'; errno: string };

export type RawStatResult =
  | {
      status: 'ok';
      pid: number;
      state: string;
      ppid: number;
      pgid: number;
      sid: number;
      startTicks: string;
    }
  | { status: 'gone' }
  | RawErrnoResult;

export type RawBootIdResult = { status: 'ok'; bootId: string } | RawErrnoResult;

export type RawMismatchReason = 'boot_id' | 'start_ticks' | 'pidfs_ino' | 'not_group_leader';
export type RawSignalMode = 'pidfd' | 'pidfd-process-group' | 'pgid-after-pidfd-check';

export type RawVerdict =
  | { outcome: 'signalled'; mode: RawSignalMode }
  | { outcome: 'already_exited' }
  | { outcome: 'identity_mismatch'; reason: RawMismatchReason }
  | { outcome: 'unsupported' }
  | { outcome: 'error'; errno: string };

export type RawCaptureResult =
  | {
      outcome: 'verified';
      pid: number;
      bootId: string;
      startTicks: string;
      pgid: number;
      pidfsIno?: string;
    }
  | Exclude<RawVerdict, { outcome: 'signalled' }>;

export type RawWatchResult = { outcome: 'watching'; id: number } | Exclude<RawVerdict, { outcome: 'signalled' }>;

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

export interface NativeAddon {
  setErrorClass(errorClass: new (message: string, code: string) => Error): void;
  readProcessStat(pid: number): RawStatResult;
  bootId(): RawBootIdResult;
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
    callback: (status: 'exited' | 'error') => void,
    hold: boolean,
  ): RawWatchResult;
  exitWatchGroupSignal(id: number, signo: number): RawVerdict;
  exitWatchCancel(id: number): boolean;
  buildInfo(): RawBuildInfo;
}
