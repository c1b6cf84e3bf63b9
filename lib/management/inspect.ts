// inspect(runId) (design/dispatch §5.1, gate 14): the low-sensitivity facts of one dispatch for a holder of
// run.read on its project — never the lease owner, token or digest (the store never selects them).
import { validateId, type DispatchInspection } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import type { Principal } from './authorization';
import { authorizeRun, runNotVisible } from './visibility';

export async function inspectDispatch(
  store: ManagementStore,
  principal: Principal,
  runId: string,
): Promise<DispatchInspection> {
  const id = validateId(runId, 'runId');
  const inspection = await store.inspectDispatch(id);
  if (inspection === null) throw runNotVisible(id, 'dispatch');
  await authorizeRun(store, principal, id, inspection.projectId, 'run.read', 'dispatch');
  return inspection;
}
