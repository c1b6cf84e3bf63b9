// Starting an attempt's launcher as the group leader (ADR-0072 §2-3): the launcher's durable handle
// is the attempt's handle (a group stop reaches launcher and job); the receipt token travels in the
// launcher's environment only. The exit Promise stays inside the execution layer (ADR-0072 §2).
import * as path from 'node:path';

import { spawnGroupLeader, type GroupLeaderSpawnOptions, type HandleStatus } from '../process/index';
import { RECEIPT_TOKEN_ENV } from './launcher-env';
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

export function launchAttempt(request: LaunchRequest): Launched {
  const args = [LAUNCHER_SCRIPT, request.receiptDirectory, request.runId, request.attemptId, String(RECEIPT_CALLBACK_SEQ), '--', request.command, ...request.args];
  const spawned = spawnGroupLeader(process.execPath, args, {
    env: { ...(request.env ?? process.env), [RECEIPT_TOKEN_ENV]: request.token },
    stdio: request.stdio ?? 'ignore',
    ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
  });
  return {
    handleStatus: spawned.handleStatus,
    pid: spawned.identity?.pid ?? null,
    handle: spawned.handle,
    exited: spawned.exit.then(() => undefined),
  };
}
