// inspect(runId) (ADR-0458, gate 14): the low-sensitivity facts of one dispatch for a holder of
// run.read on its project — never the lease owner, token or digest (the store never selects them).
import { validateId, type DispatchInspection } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { authorize, type Principal } from './authorization';
import { ManagementError } from './errors';

export function dispatchNotFound(runId: string): ManagementError {
  return new ManagementError(`run ${runId} has no cancellation dispatch (it was not cancelled, or no dispatcher has claimed it yet); check the run id.`, 'ERR_PIDFENCE_DISPATCH_NOT_FOUND');
}

export async function inspectDispatch(store: ManagementStore, principal: Principal, runId: string): Promise<DispatchInspection> {
  const id = validateId(runId, 'runId');
  const inspection = await store.inspectDispatch(id);
  if (inspection === null) throw dispatchNotFound(id);
  await authorize(store, principal, inspection.projectId, 'run.read');
  return inspection;
}
