// Starting an attempt's launcher as the group leader (design/execution §2-3): the launcher's durable handle
// is the attempt's handle (a group stop reaches launcher and job). The job's command, arguments and
// the receipt token travel over a pipe that only the launcher reads (docs/decisions/0071), never in
// its argv or environment: /proc/<pid>/cmdline is readable by every local user. The exit Promise
// stays inside the execution layer (design/execution §2).
import * as path from 'node:path';
import type { Writable } from 'node:stream';

import { spawnGroupLeader, type GroupLeaderSpawnOptions, type HandleStatus } from '../process/index';
import { LAUNCH_ORDER_FD, type LaunchOrder } from './launch-order';
import { RECEIPT_CALLBACK_SEQ } from './receipts';

export const LAUNCHER_SCRIPT = path.join(__dirname, 'launcher-main.js');

export interface LaunchRequest {
  readonly receiptDirectory: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly token: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly stdio?: GroupLeaderSpawnOptions['stdio'];
  readonly cwd?: string;
}

export interface Launched {
  readonly handleStatus: HandleStatus;
  readonly pid: number | null;
  readonly handle: string | null;
  /** Internal: resolves when the launcher exited (feeds the completion notices, nothing else). */
  readonly exited: Promise<void>;
}

type StdioEntry = 'pipe' | 'ignore' | 'inherit' | number | null | undefined | object;

function stdioWithOrderPipe(stdio: GroupLeaderSpawnOptions['stdio']): StdioEntry[] {
  let base: StdioEntry[] = ['ignore', 'ignore', 'ignore'];
  if (typeof stdio === 'string') base = [stdio as StdioEntry, stdio as StdioEntry, stdio as StdioEntry];
  else if (Array.isArray(stdio)) base = (stdio as readonly StdioEntry[]).slice(0, LAUNCH_ORDER_FD);
  while (base.length < LAUNCH_ORDER_FD) base.push('ignore');
  return [...base, 'pipe'];
}

export function launchAttempt(request: LaunchRequest): Launched {
  const spawned = spawnGroupLeader(process.execPath, [LAUNCHER_SCRIPT], {
    env: request.env ?? process.env,
    stdio: stdioWithOrderPipe(request.stdio ?? 'ignore') as GroupLeaderSpawnOptions['stdio'],
    ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
  });
  const order: LaunchOrder = {
    receiptDirectory: request.receiptDirectory, runId: request.runId, attemptId: request.attemptId, seq: RECEIPT_CALLBACK_SEQ,
    token: request.token, command: request.command, args: request.args,
  };
  const pipe = spawned.child.stdio[LAUNCH_ORDER_FD] as Writable | null | undefined;
  if (pipe) {
    // A launcher that died before reading leaves EPIPE here: its exit is what the lifecycle sees.
    pipe.on('error', () => undefined);
    pipe.end(JSON.stringify(order));
  }
  return {
    handleStatus: spawned.handleStatus,
    pid: spawned.identity?.pid ?? null,
    handle: spawned.handle,
    exited: spawned.exit.then(() => undefined),
  };
}
