// Starting an attempt's launcher as the group leader (design/execution §2-3): the launcher's durable handle
// is the attempt's handle (a group stop reaches launcher and job). The launcher is the native program
// (docs/decisions/0150-0153); the job's command, arguments and the receipt token travel over a pipe
// that only the launcher reads (docs/decisions/0071), never in its argv or environment:
// /proc/<pid>/cmdline is readable by every local user. With a log, the launcher owns the job's
// stdout and stderr and copies them to the run's log and to its own fds (docs/decisions/0250). The
// exit Promise stays inside the execution layer (design/execution §2).
import type { Writable } from 'node:stream';

import { launcherPath, type JobCgroupRef } from '../native/index';
import type { Environment } from '../base/environment';
import {
  createJobCgroup,
  discardJobCgroup,
  formatHandle,
  parseHandle,
  resolveCgroupSubtree,
  spawnGroupLeader,
  type Containment,
  type GroupLeaderSpawnOptions,
  type HandleStatus,
  type JobStdioEntry,
} from '../process/index';
import { validateJobLogSettings, type JobLogSettings } from './job-log';
import {
  encodeLaunchOrder,
  LAUNCH_ORDER_FD,
  LEFTOVER_POLICY_DEFAULT,
  type LaunchLog,
  type LeftoverPolicy,
} from './launch-order';
import { RECEIPT_CALLBACK_SEQ } from './receipts';

/** How long leftovers get between TERM and KILL when the caller names no grace: the stop grace's default. */
export const LEFTOVER_GRACE_DEFAULT_MS = 5_000;

export interface LaunchRequest {
  readonly receiptDirectory: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly token: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: Environment;
  readonly stdio?: GroupLeaderSpawnOptions['stdio'];
  readonly cwd?: string;
  /** Processes alive after the job's leader ended: stopped (default) or left running. */
  readonly leftovers?: LeftoverPolicy;
  /** TERM → KILL grace for leftovers (default LEFTOVER_GRACE_DEFAULT_MS). */
  readonly leftoverGraceMs?: number;
  /**
   * Keep the job's output in `<directory>/<runId>.log` (docs/decisions/0250); the job's stdout and
   * stderr are then also copied to the launcher's fds 1 and 2 unless `stdio` ignores them.
   */
  readonly log?: JobLogSettings;
  /**
   * The cgroup v2 subtree the job's own cgroup is made in (docs/decisions/0180); null: group
   * containment. Default: resolveCgroupSubtree().
   */
  readonly cgroupSubtree?: string | null;
  /** How much nicer than the launcher the job runs (docs/decisions/0441); default 0. */
  readonly jobNice?: number;
}

export interface Launched {
  readonly handleStatus: HandleStatus;
  readonly pid: number | null;
  readonly handle: string | null;
  /** cgroup: the job was born in its own cgroup, whose id the handle carries. */
  readonly containment: Containment;
  /** Internal: resolves when the launcher exited (feeds the completion notices, nothing else). */
  readonly exited: Promise<void>;
}

function stdioWithOrderPipe(stdio: GroupLeaderSpawnOptions['stdio']): JobStdioEntry[] {
  let base: JobStdioEntry[] = ['ignore', 'ignore', 'ignore'];
  if (typeof stdio === 'string') base = [stdio, stdio, stdio];
  else if (Array.isArray(stdio)) base = stdio.slice(0, LAUNCH_ORDER_FD);
  while (base.length < LAUNCH_ORDER_FD) base.push('ignore');
  return [...base, 'pipe'];
}

/** A stdio entry the launcher's own fd gets from the caller: copied to unless it is ignored. */
function copiedTo(stdio: JobStdioEntry[], fd: 1 | 2): boolean {
  const entry = stdio[fd];
  return entry !== 'ignore' && entry !== null && entry !== undefined;
}

function launchLogOf(log: JobLogSettings | undefined, stdio: JobStdioEntry[]): LaunchLog | null {
  if (log === undefined) return null;
  return { ...validateJobLogSettings(log), teeStdout: copiedTo(stdio, 1), teeStderr: copiedTo(stdio, 2) };
}

/** The attempt's own cgroup, or null (group containment) where none is configured or it cannot be made. */
function jobCgroupOf(request: LaunchRequest): ReturnType<typeof createJobCgroup> | null {
  const subtree = request.cgroupSubtree === undefined ? resolveCgroupSubtree() : request.cgroupSubtree;
  if (subtree === null) return null;
  try {
    return createJobCgroup(subtree, request.attemptId);
  } catch {
    return null; // stated as `containment: group` on the run, never hidden
  }
}

/**
 * The launcher's handle with the job cgroup's id and subtree added (a v2 handle; v1 has no place for
 * them): whoever stops the job finds its cgroup there (docs/decisions/0304).
 */
function withCgroup(handle: string | null, ref: JobCgroupRef): string | null {
  if (handle === null) return null;
  const parsed = parseHandle(handle);
  return parsed.v === 1 ? handle : formatHandle({ ...parsed, cgroupId: ref.id, cgroupSubtree: ref.subtree });
}

/**
 * A launcher waiting for its order: it starts the job only when `sendOrder` writes it, so the job
 * runs only once the caller stored the handle that proves it (docs/decisions/0310). A launcher whose
 * order is withdrawn, or whose runner dies first, reads EOF and exits without starting anything.
 */
export interface PendingLaunch extends Launched {
  /** Writes the order and closes the pipe: the launcher starts the job. */
  sendOrder(): void;
  /** Closes the pipe without an order: the launcher exits (status 2) and no job is started. */
  withdrawOrder(): void;
}

function encodeOrderOf(request: LaunchRequest, stdio: JobStdioEntry[], cgroupPath: string | null): Uint8Array {
  return encodeLaunchOrder({
    receiptDirectory: request.receiptDirectory,
    runId: request.runId,
    attemptId: request.attemptId,
    seq: RECEIPT_CALLBACK_SEQ,
    token: request.token,
    command: request.command,
    args: request.args,
    leftovers: request.leftovers ?? LEFTOVER_POLICY_DEFAULT,
    leftoverGraceMs: request.leftoverGraceMs ?? LEFTOVER_GRACE_DEFAULT_MS,
    log: launchLogOf(request.log, stdio),
    cgroupPath,
    ...(request.jobNice === undefined ? {} : { jobNice: request.jobNice }),
  });
}

/** Starts the launcher with its order held back; the caller sends or withdraws it (once). */
export function spawnLauncher(request: LaunchRequest): PendingLaunch {
  const stdio = stdioWithOrderPipe(request.stdio ?? 'ignore');
  const cgroup = jobCgroupOf(request);
  // Encoded before the spawn: an order the launcher would refuse is refused here, with nothing started.
  let order: Uint8Array;
  try {
    order = encodeOrderOf(request, stdio, cgroup?.path ?? null);
  } catch (error) {
    if (cgroup !== null) discardJobCgroup(cgroup.path);
    throw error;
  }
  const spawned = spawnGroupLeader(launcherPath(), [], {
    env: request.env ?? process.env,
    stdio,
    ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
  });
  // Only a launcher that is already gone leaves its cgroup unused. Without the addon (no handle, the
  // launcher runs) the launcher still opens the cgroup for the job: removing it here left the job
  // unstarted and the run waiting for ever.
  if (cgroup !== null && spawned.handleStatus === 'exited_before_capture') discardJobCgroup(cgroup.path);
  const pipe = spawned.child.stdio[LAUNCH_ORDER_FD] as Writable | null | undefined;
  // A launcher that died before reading leaves EPIPE here: its exit is what the lifecycle sees.
  pipe?.on('error', () => undefined);
  let settled = false;
  const settle = (bytes: Uint8Array | null): void => {
    if (settled) return;
    settled = true;
    if (bytes === null) pipe?.end();
    else pipe?.end(bytes);
  };
  return {
    handleStatus: spawned.handleStatus,
    pid: spawned.identity?.pid ?? null,
    handle: cgroup === null ? spawned.handle : withCgroup(spawned.handle, cgroup.ref),
    containment: cgroup === null || spawned.handle === null ? 'group' : 'cgroup',
    exited: spawned.exit.then(() => undefined),
    sendOrder: () => settle(order),
    withdrawOrder: () => settle(null),
  };
}

/** Starts the launcher and sends its order at once (for callers that store no handle first). */
export function launchAttempt(request: LaunchRequest): Launched {
  const pending = spawnLauncher(request);
  pending.sendOrder();
  return pending;
}
