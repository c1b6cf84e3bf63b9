// Starting a job as its own process-group leader with its durable handle captured before the
// child can be reaped (design/dispatch §2.3, design/execution §3).
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

import { PidfenceError } from '../base/errors';
import { captureIdentity, type ProcessIdentity } from '../native/index';
import { formatHandle, handleFromIdentity } from './durable-handle';

export interface JobExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/**
 * `captured`: handle and identity are set. `exited_before_capture`: the job finished before its
 * identity could be read (it is not running, so there is nothing to stop). `unsupported`: this
 * platform or kernel cannot prove identities; the job runs but can never be signalled.
 */
export type HandleStatus = 'captured' | 'exited_before_capture' | 'unsupported';

export interface SpawnedJob {
  readonly child: ChildProcess;
  readonly handleStatus: HandleStatus;
  /** The durable handle text to store with the Attempt, or null (see handleStatus). */
  readonly handle: string | null;
  readonly identity: ProcessIdentity | null;
  readonly exit: Promise<JobExit>;
}

export type GroupLeaderSpawnOptions = Omit<SpawnOptions, 'detached' | 'shell'>;

function captureInSameTick(pid: number): { status: HandleStatus; identity: ProcessIdentity | null } {
  try {
    const identity = captureIdentity(pid);
    return identity === null ? { status: 'exited_before_capture', identity: null } : { status: 'captured', identity };
  } catch (error) {
    if (error instanceof PidfenceError && (error.code === 'ERR_PIDFENCE_UNSUPPORTED' || error.code === 'ERR_PIDFENCE_ADDON_UNAVAILABLE')) {
      return { status: 'unsupported', identity: null };
    }
    throw error;
  }
}

/**
 * Spawns `command` as the leader of a new session and process group (`detached: true` makes
 * libuv call setsid()), and captures its identity in the same tick: libuv reaps children only
 * from its event loop, so the PID cannot have been reused yet. No shell is involved.
 */
export function spawnGroupLeader(command: string, args: readonly string[], options: GroupLeaderSpawnOptions = {}): SpawnedJob {
  const child = spawn(command, args, { ...options, detached: true, shell: false });
  const exit = new Promise<JobExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  if (child.pid === undefined) {
    // spawn failed (ENOENT, EACCES): the 'error' event carries the reason.
    return { child, handleStatus: 'exited_before_capture', handle: null, identity: null, exit };
  }
  const { status, identity } = captureInSameTick(child.pid);
  const handle = identity === null ? null : formatHandle(handleFromIdentity(identity));
  return { child, handleStatus: status, handle, identity, exit };
}
