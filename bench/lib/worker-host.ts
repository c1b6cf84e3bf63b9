// Several workers in one process, for bench/fleet.ts (issue 29: "several may share a process"). Each
// worker has its own certificate (its own principal and session), its own journal and its own jobs,
// exactly as `pidfence worker` starts one; only the node process, its event loop and its heap are
// shared. Not a test. Run: node worker-host.js <plan.json>; SIGTERM drains every worker, then exits.
import { readFileSync, writeFileSync } from 'node:fs';

import { startWorker, type Worker } from '../../lib/cluster/index';

/** What bench/fleet.ts writes for one host process. */
export interface WorkerHostPlan {
  readonly urls: readonly string[];
  readonly ca: string;
  readonly capacity: number;
  readonly tickMs: number;
  readonly graceMs: number;
  readonly jobNice: number;
  readonly workers: ReadonlyArray<{ readonly cert: string; readonly key: string; readonly journal: string }>;
}

/** When this host's workers were told of stops and had ends taken (wall-clock ms), for the bench's timeline. */
export interface WorkerHostTimeline {
  readonly stopsToldMs: number[];
  readonly endsTakenMs: number[];
}

/** Where a host writes its timeline when it is told to stop. */
export function timelineFileOf(planFile: string): string {
  return `${planFile}.timeline.json`;
}

async function main(): Promise<void> {
  const planFile = process.argv[2] as string;
  const plan = JSON.parse(readFileSync(planFile, 'utf8')) as WorkerHostPlan;
  const ca = readFileSync(plan.ca);
  const workers: Worker[] = [];
  const timeline: WorkerHostTimeline = { stopsToldMs: [], endsTakenMs: [] };
  const observe = ({ what }: { readonly what: string }): void => {
    if (what === 'tick_stop_requested') timeline.stopsToldMs.push(Date.now());
    else if (what === 'completion_completed') timeline.endsTakenMs.push(Date.now());
  };
  for (const entry of plan.workers)
    workers.push(
      await startWorker({
        controlPlaneUrls: plan.urls,
        tls: { cert: readFileSync(entry.cert), key: readFileSync(entry.key), ca },
        journalFile: entry.journal,
        capacity: plan.capacity,
        tickMs: plan.tickMs,
        graceMs: plan.graceMs,
        jobNice: plan.jobNice,
        observe,
      }),
    );
  await new Promise<void>((resolve) => process.once('SIGTERM', resolve));
  writeFileSync(timelineFileOf(planFile), JSON.stringify(timeline));
  await Promise.all(workers.map((worker) => worker.close()));
}

// Imported by bench/fleet.ts for its types and file names; run only as a host process.
if (require.main === module)
  void main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
