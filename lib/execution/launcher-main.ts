// The launcher (ADR-0072 §2, docs/decisions/0050): the group leader that starts the job in its own
// process group, waits for it, writes the completion receipt atomically and exits with the job's
// status. It outlives nothing but the job; it ignores TERM/INT/HUP so a group stop reaches the job
// while the launcher stays to record how the job ended (a group KILL ends both: no receipt).
// argv: <receiptDir> <runId> <attemptId> <seq> -- <command> [args...]; the token arrives in the
// environment (never argv) and is removed before the job starts.
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';

import { RECEIPT_VERSION, receiptWriteAtomic } from './receipts';

import { RECEIPT_TOKEN_ENV } from './launcher-env';

function main(argv: readonly string[]): void {
  const separator = argv.indexOf('--');
  const [receiptDir, runId, attemptId, seqText] = argv.slice(0, separator);
  const [command, ...args] = argv.slice(separator + 1);
  const token = process.env[RECEIPT_TOKEN_ENV];
  if (separator !== 4 || !receiptDir || !runId || !attemptId || !seqText || !command || token === undefined) {
    process.stderr.write('pidfence launcher: started without its arguments; it is run by pidfence, not by hand.\n');
    process.exit(2);
  }
  const env = { ...process.env };
  delete env[RECEIPT_TOKEN_ENV];
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);

  const startedAtMs = Date.now();
  let settled = false;
  const finish = (exitCode: number | null, signal: NodeJS.Signals | null, spawnFailed: boolean): void => {
    if (settled) return;
    settled = true;
    try {
      receiptWriteAtomic(receiptDir, {
        v: RECEIPT_VERSION, runId, attemptId, seq: Number(seqText), token, exitCode, signal, startedAtMs, finishedAtMs: Date.now(), spawnFailed,
      });
    } catch (error) {
      process.stderr.write(`pidfence launcher: the completion receipt could not be written (${(error as NodeJS.ErrnoException).code ?? 'error'}).\n`);
    }
    const signalNumber = signal === null ? 0 : (osConstants.signals as Record<string, number>)[signal] ?? 0;
    process.exit(exitCode ?? 128 + signalNumber);
  };
  // Same process group (no detached): a stop of the launcher's group reaches the job.
  const child = spawn(command, args, { stdio: 'inherit', env });
  child.once('error', () => finish(127, null, true));
  child.once('exit', (code, signal) => finish(code, signal, false));
}

main(process.argv.slice(2));
