// Who may learn that a run exists (docs/decisions/0043): a run is visible to a holder of run.read on
// its project. To anyone else a run of another project answers exactly like a missing run — same
// code, same sentence, no project id — so refusals reveal neither existence nor ownership.
import type { Permission } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { authorizeImpersonation, notPermitted, type Principal } from './authorization';
import { ManagementError } from './errors';

/** What the refused request needed: the run itself, or also its cancellation dispatch (inspect, rearm). */
export type VisibilityScope = 'run' | 'dispatch';

/**
 * The one refusal for a run the caller may not see. It names the store when the caller knows it
 * (the CLI: `inStore`), which is the same for a missing and a foreign run, so it reveals nothing.
 */
export class RunNotVisibleError extends ManagementError {
  readonly runId: string;
  readonly scope: VisibilityScope;

  constructor(runId: string, scope: VisibilityScope, storeName?: string) {
    const where = storeName === undefined ? 'this store' : `the store ${storeName}`;
    const dispatch = scope === 'dispatch' ? ', or it has no cancellation dispatch yet' : '';
    super(
      `run ${runId} is not in ${where}, or you do not hold run.read on its project${dispatch}; check the run id, --db and your grants.`,
      'ERR_PIDFENCE_RUN_NOT_FOUND',
    );
    this.runId = runId;
    this.scope = scope;
  }

  /** The same refusal, naming the store it was asked of. */
  inStore(storeName: string): RunNotVisibleError {
    return new RunNotVisibleError(this.runId, this.scope, storeName);
  }
}

export function runNotVisible(runId: string, scope: VisibilityScope = 'run'): RunNotVisibleError {
  return new RunNotVisibleError(runId, scope);
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
  scope: VisibilityScope = 'run',
): Promise<void> {
  if (projectId === null || !(await store.hasPermission(principal.subject, projectId, 'run.read')))
    throw runNotVisible(runId, scope);
  if (permission !== 'run.read' && !(await store.hasPermission(principal.subject, projectId, permission)))
    throw notPermitted(principal.subject, permission, projectId);
  await authorizeImpersonation(store, principal, projectId);
}
