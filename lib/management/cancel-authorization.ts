// Who may cancel a run (docs/decisions/0043): a holder of run.stop on the run's project. The run
// records no runner identity, so "the runner's own user" cannot be proven and is not an exception.
// A missing run and another project's run are refused alike (visibility.ts).
import { validateId } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import type { Principal } from './authorization';
import { ManagementError } from './errors';
import { authorizeRun } from './visibility';

/** The fact of the run that authorization needs: its project, or null when the store has no such run. */
export interface CancelTarget {
  readonly projectId: string;
}

/** A cancel of a run that already ended: the same code and sentence from the CLI and over HTTP (docs/decisions/0224). */
export function runFinished(runId: string): ManagementError {
  return new ManagementError(`run ${runId} has already finished; nothing to cancel.`, 'ERR_PIDFENCE_RUN_FINISHED');
}

/** Throws ERR_PIDFENCE_RUN_NOT_FOUND (missing or unreadable) or ERR_PIDFENCE_NOT_PERMITTED (readable, no run.stop). */
export async function authorizeCancel(
  store: Pick<ManagementStore, 'hasPermission'>,
  principal: Principal,
  runId: string,
  run: CancelTarget | null,
): Promise<void> {
  await authorizeRun(store, principal, validateId(runId, 'runId'), run?.projectId ?? null, 'run.stop');
}
