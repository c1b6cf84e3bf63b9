// Several workers in one process, for bench/fleet.ts (issue 29: "several may share a process"). Each
// worker has its own certificate (its own principal and session), its own journal and its own jobs,
// exactly as `pidfence worker` starts one; only the node process, its event loop and its heap are
// shared. Not a test. Run: node worker-host.js <plan.json>; SIGTERM drains every worker, then exits.
import { readFileSync } from 'node:fs';

import { startWorker, type Worker } from '../../lib/cluster/index';

/** What bench/fleet.ts writes for one host process. */
export interface WorkerHostPlan {
  readonly urls: readonly string[];
  readonly ca: string;
  readonly capacity: number;
  readonly tickMs: number;
  readonly graceMs: number;
  readonly workers: ReadonlyArray<{ readonly cert: string; readonly key: string; readonly journal: string }>;
}

async function main(): Promise<void> {
  const plan = JSON.parse(readFileSync(process.argv[2] as string, 'utf8')) as WorkerHostPlan;
  const ca = readFileSync(plan.ca);
  const workers: Worker[] = [];
  for (const entry of plan.workers)
    workers.push(
      await startWorker({
        controlPlaneUrls: plan.urls,
        tls: { cert: readFileSync(entry.cert), key: readFileSync(entry.key), ca },
        journalFile: entry.journal,
        capacity: plan.capacity,
        tickMs: plan.tickMs,
        graceMs: plan.graceMs,
      }),
    );
  await new Promise<void>((resolve) => process.once('SIGTERM', resolve));
  await Promise.all(workers.map((worker) => worker.close()));
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
