// The wake-up channel of a runner (docs/decisions/0175): a unix socket beside the store, one per
// runner, named from its id, in an owner-only directory. A connection means only "look": the
// runner runs its cycle now (coalesced: at most one extra cycle pending). It carries nothing; the
// durable rows stay the truth, so a lost, forged or flooding wake-up changes only timing, and a
// cancel that cannot reach the channel still lands on the next cycle (design/execution §4).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

import { PidfenceError } from '../base/errors';

/** sun_path holds 108 bytes with its NUL; a longer path cannot be bound or reached. */
export const SOCKET_PATH_MAX_BYTES = 107;
/** A wake-up that is not accepted at once is not worth waiting for: the next cycle takes it. */
export const WAKE_SEND_TIMEOUT_MS = 250;
/** Connections queued before the runner takes them; beyond it a sender gets EAGAIN and counts as heard (`busy`). */
export const WAKE_BACKLOG = 64;

/** The directory of the wake-up sockets of the runners of one store: `<store file>.wake`. */
export function wakeDirectoryBeside(storeFile: string): string {
  return `${storeFile}.wake`;
}

/** A runner's socket: a digest of its id (not a secret, ids are stored), short enough for sun_path. */
export function wakeSocketPath(directory: string, runnerId: string): string {
  return path.join(directory, createHash('sha256').update(`pidfence.wake.v1\0${runnerId}`).digest('hex').slice(0, 16));
}

function refused(message: string, code = 'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED'): PidfenceError {
  return new PidfenceError(message, code);
}

function euid(): number {
  return process.geteuid?.() ?? -1;
}

/** The directory must be ours alone: a real directory (no symlink), owned by this user, mode 0700. */
function checkDirectory(directory: string): void {
  const stat = fs.lstatSync(directory);
  if (!stat.isDirectory())
    throw refused('the wake-up directory beside the store is not a directory; remove it, the runner recreates it.');
  if (stat.uid !== euid())
    throw refused('the wake-up directory beside the store belongs to another user; remove it or run as its owner.');
  if ((stat.mode & 0o077) !== 0)
    throw refused('the wake-up directory beside the store is open to other users; chmod 700 it or remove it.');
}

function ensureDirectory(directory: string): void {
  try {
    fs.mkdirSync(directory, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  checkDirectory(directory);
}

/**
 * How a connect attempt to a socket path ended. `busy` (EAGAIN): a listener is there whose queue of
 * connections not yet taken is full, so it is alive, and it looks once it took them (after us).
 */
type Probe = 'live' | 'busy' | 'dead' | 'absent' | 'other';

const PROBE_OF_ERRNO: Readonly<Record<string, Probe>> = { ECONNREFUSED: 'dead', ENOENT: 'absent', EAGAIN: 'busy' };

function probeSocket(socketPath: string, timeoutMs: number): Promise<Probe> {
  return new Promise((resolve) => {
    const socket = net.connect({ path: socketPath });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('other');
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('live');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(PROBE_OF_ERRNO[error.code ?? ''] ?? 'other');
    });
  });
}

/** A socket of ours at `socketPath` that nobody listens on is removed; anything else is refused. */
async function clearStale(socketPath: string): Promise<void> {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (!stat.isSocket() || stat.uid !== euid())
    throw refused('the wake-up socket path of this runner is taken by a file that is not its socket; remove it.');
  // Only a socket proved dead (connect refused) is unlinked, never one a live runner listens on.
  const probe = await probeSocket(socketPath, WAKE_SEND_TIMEOUT_MS);
  if (probe === 'live' || probe === 'busy')
    throw refused("another live runner listens on this runner's wake-up socket; it is left alone.");
  if (probe === 'dead') fs.unlinkSync(socketPath);
}

/**
 * The socket a runner proved gone left behind (it crashed), removed when it is ours and proved
 * dead; anything else stays. Never throws: a leftover socket costs an inode, nothing more.
 */
export async function removeStaleWakeSocket(directory: string, runnerId: string): Promise<boolean> {
  const socketPath = wakeSocketPath(directory, runnerId);
  try {
    checkDirectory(directory);
    const before = fs.existsSync(socketPath);
    await clearStale(socketPath);
    return before && !fs.existsSync(socketPath);
  } catch {
    return false;
  }
}

export interface WakeListener {
  /** The socket path (for tests and the bench only). */
  readonly path: string;
  /** Stops listening and removes the socket. Idempotent. */
  close(): Promise<void>;
}

/**
 * Listens on the runner's socket; every connection is closed at once and calls `onWake` (which
 * coalesces). Refused (ERR_PIDFENCE_WAKE_CHANNEL_REFUSED) when the directory or the path belongs to
 * another user or a live runner; the runner then works on its cadence alone.
 */
export async function listenForWakeUps(directory: string, runnerId: string, onWake: () => void): Promise<WakeListener> {
  const socketPath = wakeSocketPath(directory, runnerId);
  if (Buffer.byteLength(socketPath) > SOCKET_PATH_MAX_BYTES) {
    throw refused(
      "the store's path is too long for a wake-up socket beside it; the runner works on its cadence (move the store to a shorter path for wake-ups).",
      'ERR_PIDFENCE_WAKE_PATH_TOO_LONG',
    );
  }
  try {
    ensureDirectory(directory);
    await clearStale(socketPath);
    return await listenAt(socketPath, onWake);
  } catch (error) {
    if (error instanceof PidfenceError) throw error;
    // Whatever the file system says (no sockets here, no room, a race for the path): no channel,
    // the cadence alone, never a failed runner.
    throw refused(
      `the wake-up socket beside the store could not be made (${(error as NodeJS.ErrnoException).code ?? 'error'}); the runner works on its cadence.`,
    );
  }
}

async function listenAt(socketPath: string, onWake: () => void): Promise<WakeListener> {
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    socket.destroy();
    onWake();
  });
  // A failing accept (EMFILE under a flood) loses a wake-up, never the runner.
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path: socketPath, backlog: WAKE_BACKLOG }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  fs.chmodSync(socketPath, 0o600);
  let closed: Promise<void> | null = null;
  return {
    path: socketPath,
    close() {
      closed ??= new Promise<void>((resolve) => server.close(() => resolve()));
      return closed;
    },
  };
}

/**
 * What a wake-up send found. `sent`: a live listener took the connection; `busy`: a live listener
 * whose queue is full (a flood), which runs a cycle once it took the queue, so after this commit.
 * Every other answer leaves the stop to the runner's next cycle.
 */
export type WakeSend = 'sent' | 'busy' | 'no_listener' | 'refused' | 'unreachable';

/** The runner heard it, or will before its next cycle starts. */
export function wakeHeard(send: WakeSend): boolean {
  return send === 'sent' || send === 'busy';
}

/**
 * Sends "look" to a runner's socket: one connect, nothing written. Never throws. A directory or
 * socket of another user is not written to (`refused`); no socket or a dead one is `no_listener`.
 */
export async function sendWakeUp(directory: string, runnerId: string): Promise<WakeSend> {
  const socketPath = wakeSocketPath(directory, runnerId);
  try {
    checkDirectory(directory);
    const stat = fs.lstatSync(socketPath);
    if (!stat.isSocket() || stat.uid !== euid()) return 'refused';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 'no_listener';
    return error instanceof PidfenceError ? 'refused' : 'unreachable';
  }
  const probe = await probeSocket(socketPath, WAKE_SEND_TIMEOUT_MS);
  const sends: Readonly<Record<Probe, WakeSend>> = {
    live: 'sent',
    busy: 'busy',
    dead: 'no_listener',
    absent: 'no_listener',
    other: 'unreachable',
  };
  return sends[probe];
}
