// The launcher (design/execution §2, docs/decisions/0050, 0071): the group leader that starts the job in
// its own process group, waits for it, writes the completion receipt atomically and exits with the
// job's status. It outlives nothing but the job; it ignores TERM/INT/HUP so a group stop reaches the
// job while the launcher stays to record how the job ended (a group KILL ends both: no receipt).
// Its order (command, arguments, receipt token) arrives on fd 3 and that fd is closed before the
// job starts: neither argv nor the environment ever holds them.
import { spawn } from 'node:child_process';
import { closeSync, readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';

import { LAUNCH_ORDER_FD, type LaunchOrder } from './launch-order';
import { RECEIPT_VERSION, writeReceiptAtomic } from './receipts';
import { START_FAILURE_STATUS, startFailureOf } from './start-failure';

function readOrder(): LaunchOrder | null {
  try {
    const text = readFileSync(LAUNCH_ORDER_FD, 'utf8');
    closeSync(LAUNCH_ORDER_FD);
    const order = JSON.parse(text) as Partial<LaunchOrder>;
    const valid = typeof order.receiptDirectory === 'string' && typeof order.runId === 'string' && typeof order.attemptId === 'string'
      && typeof order.seq === 'number' && typeof order.token === 'string' && typeof order.command === 'string' && order.command.length > 0
      && Array.isArray(order.args) && order.args.every((arg) => typeof arg === 'string');
    return valid ? (order as LaunchOrder) : null;
  } catch {
    return null;
  }
}

function main(): void {
  const order = readOrder();
  if (order === null) {
    process.stderr.write('pidfence launcher: started without its order; it is run by pidfence, not by hand.\n');
    process.exit(2);
  }
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);

  const startedAtMs = Date.now();
  let settled = false;
  const finish = (exitCode: number | null, signal: NodeJS.Signals | null, spawnFailed: boolean): void => {
    if (settled) return;
    settled = true;
    try {
      writeReceiptAtomic(order.receiptDirectory, {
        v: RECEIPT_VERSION, runId: order.runId, attemptId: order.attemptId, seq: order.seq, token: order.token,
        exitCode, signal, startedAtMs, finishedAtMs: Date.now(), spawnFailed,
      });
    } catch (error) {
      process.stderr.write(`pidfence launcher: the completion receipt could not be written (${(error as NodeJS.ErrnoException).code ?? 'error'}).\n`);
    }
    const signalNumber = signal === null ? 0 : (osConstants.signals as Record<string, number>)[signal] ?? 0;
    process.exit(exitCode ?? 128 + signalNumber);
  };
  // Same process group (no detached): a stop of the launcher's group reaches the job.
  const child = spawn(order.command, order.args, { stdio: 'inherit', env: process.env });
  // The statuses shells use: 126 found but not executable, 127 not found (or not startable at all).
  child.once('error', (error: NodeJS.ErrnoException) => finish(START_FAILURE_STATUS[startFailureOf(error.code)], null, true));
  child.once('exit', (code, signal) => finish(code, signal, false));
}

main();
