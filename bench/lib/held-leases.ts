// Shared by the cluster benchmarks that hold many leases: workers, each with its session and its
// jobs pulled, through the cluster lease store of whichever tree the benchmark loaded.
import type { Assignment, ClusterLeaseStore, WorkerCaller } from '../../lib/cluster/index';

export interface HeldWorker {
  readonly caller: WorkerCaller;
  readonly refs: Assignment[];
}

/**
 * `jobs` jobs of `projectId`, `perWorker` to a worker: each worker registers, its jobs are enqueued
 * (run ids `<label>-<worker>-<job>`), and it pulls them in one page.
 */
export async function holdJobs(
  leases: Pick<ClusterLeaseStore, 'registerSession' | 'enqueueJob' | 'pullPage'>,
  label: string,
  jobs: number,
  options: { readonly perWorker: number; readonly projectId: string },
): Promise<HeldWorker[]> {
  const workers: HeldWorker[] = [];
  for (let w = 0; w * options.perWorker < jobs; w++) {
    const count = Math.min(options.perWorker, jobs - w * options.perWorker);
    const principal = `bench-${label}-${w}`;
    const caller = { principal, sessionId: await leases.registerSession(principal) };
    for (let i = 0; i < count; i++)
      await leases.enqueueJob({ runId: `${label}-${w}-${i}`, projectId: options.projectId, argv: ['sleep', '600'] });
    const page = await leases.pullPage(caller, count);
    if (page.kind !== 'assigned' || page.assignments.length !== count)
      throw new Error('pull did not hand out the jobs');
    workers.push({ caller, refs: [...page.assignments] });
  }
  return workers;
}
