// What a run answers once it ended (docs/decisions/0141, 0243): the job's exit status as a shell
// reports it and the RunReport `run --json` prints, the same for a local run and a cluster run.
import { constants as osConstants } from 'node:os';

import type { RunTerminalStatus } from '../contract/index';
import type { CompletionOutcome, StartFailure } from '../execution/index';
import type { RunExit } from '../management/index';
import { EXIT } from './exit-codes';

/** What `timeout(1)` answers for a command it timed out, whatever the command then did (docs/decisions/0225). */
export const TIMED_OUT_EXIT = 124;

/** The job's status as a shell reports it: its exit code, or 128 + the signal that ended it; 124 when it timed out. */
export function exitStatusOf(outcome: CompletionOutcome): number {
  const timedOut = (outcome.kind === 'completed' || outcome.kind === 'terminal') && outcome.status === 'timed_out';
  return timedOut ? TIMED_OUT_EXIT : jobExitStatus(outcome);
}

function jobExitStatus(outcome: CompletionOutcome): number {
  if (outcome.kind === 'terminal') return outcome.status === 'succeeded' ? EXIT.ok : EXIT.failure;
  if (outcome.kind !== 'completed') return EXIT.failure;
  if (outcome.exitCode !== null) return outcome.exitCode;
  if (outcome.signal !== null) return 128 + ((osConstants.signals as Record<string, number>)[outcome.signal] ?? 0);
  // Stopped without a receipt: the group was killed after its grace period.
  return outcome.cause === 'stopped' ? 128 + osConstants.signals.SIGKILL : EXIT.failure;
}

/** What `run --json` prints on stdout once the run ended (docs/decisions/0141): one document. */
export interface RunReport {
  readonly runId: string;
  /** The name given with --name (docs/decisions/0251); null when none. */
  readonly name: string | null;
  readonly projectId: string;
  /** The run's terminal status; null when the drain timed out before it converged. */
  readonly status: RunTerminalStatus | null;
  /** pidfence's own exit status: the job's, as a shell reports it (124 for a timed-out job, as timeout(1)). */
  readonly exitStatus: number;
  /** How the job ended: exit code or signal, and the cause; null when that is not known. */
  readonly exit: RunExit | null;
  /** The job could not be started at all: `command_not_found` (exit 127) or `permission_denied` (126). */
  readonly startFailure: StartFailure | null;
}

export function runReportOf(
  runId: string,
  name: string | null,
  projectId: string,
  outcome: CompletionOutcome,
): RunReport {
  const completed = outcome.kind === 'completed' ? outcome : null;
  return {
    runId,
    name,
    projectId,
    status: outcome.kind === 'completed' || outcome.kind === 'terminal' ? outcome.status : null,
    exitStatus: exitStatusOf(outcome),
    exit:
      completed === null ? null : { cause: completed.cause, exitCode: completed.exitCode, signal: completed.signal },
    startFailure: completed?.startFailure ?? null,
  };
}
