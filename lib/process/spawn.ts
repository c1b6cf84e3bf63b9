// Starting a job as its own process-group leader with its durable handle captured before the
// child can be reaped (design/dispatch §2.3, design/execution §3).
import { spawn, type StdioOptions } from 'node:child_process';

import type { Environment } from '../base/environment';
import { PidfenceError, PidfenceTypeError } from '../base/errors';
import { isPlainObject } from '../base/shape';
import { captureIdentity, type ProcessIdentity } from '../native/index';
import { formatHandle, handleFromIdentity } from './durable-handle';

/** A signal's name as Node reports it (`SIGTERM`); written without @types/node (docs/decisions/0222). */
export type SignalName = `SIG${string}`;

export interface JobExit {
  readonly code: number | null;
  readonly signal: SignalName | null;
}

/** A listener of a Node event emitter, any arguments (typed without @types/node: docs/decisions/0222). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the arguments depend on the event, as in Node's own types
type Listener = (...args: any[]) => void;

/** Node's event-emitter methods that the child and its streams offer. */
export interface JobEventSource {
  on(event: string, listener: Listener): this;
  once(event: string, listener: Listener): this;
  off(event: string, listener: Listener): this;
}

/** The job's stdout or stderr when `stdio` asked for a pipe: a Node `Readable`. */
export interface JobReadable extends JobEventSource {
  setEncoding(encoding: string): this;
}

/** The job's stdin when `stdio` asked for a pipe: a Node `Writable`. */
export interface JobWritable extends JobEventSource {
  write(chunk: string | Uint8Array, callback?: (error?: Error | null) => void): boolean;
  end(callback?: () => void): this;
}

/**
 * The job's Node `ChildProcess`, declared through the members pidfence promises so that these
 * declarations need no @types/node (docs/decisions/0222). It is a real ChildProcess: a program with
 * @types/node may cast it (`job.child as ChildProcess`) for the rest of its API. Its `kill()` is
 * left out on purpose: it signals a bare PID; stop the job through LocalProcessController.
 */
export interface JobChild extends JobEventSource {
  readonly pid?: number | undefined;
  readonly exitCode: number | null;
  readonly signalCode: SignalName | null;
  readonly stdin: JobWritable | null;
  readonly stdout: JobReadable | null;
  readonly stderr: JobReadable | null;
  readonly stdio: readonly unknown[];
}

/**
 * `captured`: handle and identity are set. `exited_before_capture`: the job finished before its
 * identity could be read (it is not running, so there is nothing to stop). `unsupported`: this
 * platform or kernel cannot prove identities; the job runs but can never be signalled.
 */
export type HandleStatus = 'captured' | 'exited_before_capture' | 'unsupported';

export interface SpawnedJob {
  readonly child: JobChild;
  readonly handleStatus: HandleStatus;
  /** The durable handle text to store with the Attempt, or null (see handleStatus). */
  readonly handle: string | null;
  readonly identity: ProcessIdentity | null;
  readonly exit: Promise<JobExit>;
}

/** One of the job's standard streams, as Node's `stdio` takes it: a name, a descriptor, a stream, or null. */
export type JobStdioEntry = 'pipe' | 'ignore' | 'inherit' | 'ipc' | number | object | null | undefined;

/**
 * Node's spawn options that a group leader may use. Not `shell` (no shell is involved), not
 * `detached` (always on), and not `timeout`, `killSignal` or `signal`: with those Node itself would
 * signal the job by its bare PID (design/dispatch §2.3).
 */
export interface GroupLeaderSpawnOptions {
  readonly cwd?: string;
  readonly env?: Environment;
  readonly stdio?: 'pipe' | 'ignore' | 'inherit' | readonly JobStdioEntry[];
  readonly uid?: number;
  readonly gid?: number;
  readonly argv0?: string;
}

const SPAWN_OPTION_KEYS: ReadonlySet<string> = new Set(['cwd', 'env', 'stdio', 'uid', 'gid', 'argv0']);

/** A plain object of the keys above only: anything else (`timeout`, `shell`) is refused, with nothing started. */
function validateSpawnOptions(options: unknown): GroupLeaderSpawnOptions {
  const unknown = isPlainObject(options) ? Object.keys(options).find((key) => !SPAWN_OPTION_KEYS.has(key)) : undefined;
  if (!isPlainObject(options) || unknown !== undefined) {
    throw new PidfenceTypeError(
      `spawnGroupLeader options may hold only ${[...SPAWN_OPTION_KEYS].join(', ')}${unknown === undefined ? '' : `, not ${unknown}`}: pidfence stops the job itself, through its verified handle.`,
      'ERR_PIDFENCE_INVALID_OPTIONS',
    );
  }
  return options as GroupLeaderSpawnOptions;
}

function captureInSameTick(pid: number): { status: HandleStatus; identity: ProcessIdentity | null } {
  try {
    const identity = captureIdentity(pid);
    return identity === null ? { status: 'exited_before_capture', identity: null } : { status: 'captured', identity };
  } catch (error) {
    if (
      error instanceof PidfenceError &&
      (error.code === 'ERR_PIDFENCE_UNSUPPORTED' || error.code === 'ERR_PIDFENCE_ADDON_UNAVAILABLE')
    ) {
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
export function spawnGroupLeader(
  command: string,
  args: readonly string[],
  options: GroupLeaderSpawnOptions = {},
): SpawnedJob {
  const { stdio, ...rest } = validateSpawnOptions(options);
  const child = spawn(command, args, {
    ...rest,
    ...(stdio === undefined ? {} : { stdio: (typeof stdio === 'string' ? stdio : [...stdio]) as StdioOptions }),
    detached: true,
    shell: false,
  });
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
