// Who may learn that a run exists (docs/decisions/0043): a run is visible to a holder of run.read on
// its project. To anyone else a run of another project answers exactly like a missing run — same
// code, same sentence, no project id — so refusals reveal neither existence nor ownership.
import type { Permission } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { authorizeImpersonation, notPermitted, type Principal } from './authorization';
import { ManagementError } from './errors';

export function runNotVisible(runId: string): ManagementError {
  return new ManagementError(
    `run ${runId} is not in this store, or you do not hold run.read on its project, or it has no cancellation dispatch yet; check the run id, --db and your grants.`,
    'ERR_PIDFENCE_RUN_NOT_FOUND',
  );
}

/**
 * Passes when the principal may act on the run with `permission`. A missing run (projectId null)
 * and a run the principal cannot read are the same refusal. One who can read the run but lacks a
 * stronger permission is told which, since the run's existence is no secret to them.
 */
export async function authorizeRun(
  store: Pick<ManagementStore, 'hasPermission'>,
  principal: Principal,
  runId: string,
  projectId: string | null,
  permission: Permission,
): Promise<void> {
  if (projectId === null || !(await store.hasPermission(principal.subject, projectId, 'run.read'))) throw runNotVisible(runId);
  if (permission !== 'run.read' && !(await store.hasPermission(principal.subject, projectId, permission))) throw notPermitted(principal.subject, permission, projectId);
  await authorizeImpersonation(store, principal, projectId);
}
