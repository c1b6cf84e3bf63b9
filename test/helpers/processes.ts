// Real child processes for tests: started as their own group leader, identity captured in the
// same tick as spawn, output collected, and cleaned up only through the verified path
// (signalVerified SIGKILL to the proved group), never a bare PID.
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';

import type { ExecutionContext } from 'ava';

import { captureIdentity, signalVerified, waitExit, type ProcessIdentity } from '../../lib/native/index';

export const fixturesDir = path.resolve(__dirname, '..', '..', '..', 'test', 'fixtures');

export interface Job {
  readonly child: ChildProcess;
  readonly identity: ProcessIdentity;
  /** Every stdout line so far. */
  readonly lines: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once a line matching `pattern` has been written. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGKILL to the proved group, then wait for the leader's exit. */
  stop(): Promise<void>;
}

/** How long a job's end waits for its output pipe to close after the process exited. */
const PIPE_DRAIN_MS = 2_000;

export function spawnJob(
  t: ExecutionContext,
  command: string,
  args: readonly string[] = [],
  options: { argv0?: string; env?: NodeJS.ProcessEnv } = {},
): Job {
  const child = spawn(command, args, {
    ...(options.env === undefined ? {} : { env: options.env }),
    detached: true, // setsid(): the child leads its own session and process group
    // stderr ignored: shells report children killed by the test's signals there.
    stdio: ['ignore', 'pipe', 'ignore'],
    ...(options.argv0 === undefined ? {} : { argv0: options.argv0 }),
  });
  if (child.pid === undefined) throw new Error(`spawn ${command} failed`);
  // Same tick as spawn: libuv cannot have reaped the child yet, so this pid is still ours.
  const identity = captureIdentity(child.pid);
  if (identity === null) throw new Error(`${command} exited before its identity was captured`);

  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  let buffered = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  // 'exit' can come before the last of the pipe is read (seen under load: a final line missing), so
  // the end waits for the pipe to close too; a descendant that keeps the pipe open (an escaped child)
  // holds it at most PIPE_DRAIN_MS.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      const stdout = child.stdout;
      if (stdout === null || stdout.destroyed) return resolve({ code, signal });
      const fallback = setTimeout(() => resolve({ code, signal }), PIPE_DRAIN_MS);
      stdout.once('close', () => {
        clearTimeout(fallback);
        resolve({ code, signal });
      });
    });
  });

  const job: Job = {
    child,
    identity,
    lines,
    exited,
    // A readiness wait, not a speed check: a process started under load 24 took over 5 s to print its first line.
    waitForLine(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const deadline = setTimeout(
          () => reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms; got ${JSON.stringify(lines)}`)),
          timeoutMs,
        );
        const check = () => {
          const found = lines.find((line) => pattern.test(line));
          if (found !== undefined) {
            clearTimeout(deadline);
            resolve(found);
          } else {
            waiters.push(check);
          }
        };
        check();
      });
    },
    async stop() {
      const outcome = signalVerified(identity, 'SIGKILL', { group: true });
      if (outcome.kind === 'signalled') await waitExit(identity, 5000);
      await exited;
    },
  };
  t.teardown(() => job.stop());
  return job;
}

/** The recorder fixture: a leader and one member in its group, both logging signals. */
export async function spawnRecorder(t: ExecutionContext): Promise<Job & { memberPid: number }> {
  const job = spawnJob(t, 'sh', [path.join(fixturesDir, 'recorder.sh'), 'leader']);
  await job.waitForLine(/^leader-ready /);
  const memberLine = await job.waitForLine(/^member-ready /);
  return Object.assign(job, { memberPid: Number(memberLine.split(' ')[1]) });
}

/** Lines that record a received signal (everything but the ready lines). */
export function receivedSignals(job: Job): string[] {
  return job.lines.filter((line) => !line.includes('-ready'));
}
