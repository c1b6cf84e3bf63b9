// Several workers in one process, for bench/fleet.ts (issue 29: "several may share a process"). Each
// worker has its own certificate (its own principal and session), its own journal and its own jobs,
// exactly as `pidfence worker` starts one; only the node process, its event loop and its heap are
// shared. Not a test. Run: node worker-host.js <plan.json>; SIGTERM drains every worker, then exits.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import tls from 'node:tls';

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
  /** Set: this host profiles its JavaScript for PROFILE_MS from the moment `markFile` appears, into `outFile`. */
  readonly profile?: { readonly markFile: string; readonly outFile: string };
}

/** When this host's workers were told of stops and had ends taken (wall-clock ms), for the bench's timeline. */
export interface WorkerHostTimeline {
  readonly stopsToldMs: number[];
  readonly endsTakenMs: number[];
  /** Each LOOP_SAMPLE_MS: [wall-clock ms, the event loop's longest delay in it, ms]. */
  readonly loopDelays: Array<[number, number]>;
  /** The workers' observations (`what` or `what:code`), counted per wall-clock second. */
  readonly observations: Record<string, Record<string, number>>;
}

const LOOP_SAMPLE_MS = 500;
const PROFILE_MS = 15_000;

/** The event loop's longest delay in every LOOP_SAMPLE_MS, into `into`; stops with the process. */
function sampleLoopDelay(into: Array<[number, number]>): void {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  setInterval(() => {
    into.push([Date.now(), Math.round(histogram.max / 1e6)]);
    histogram.reset();
  }, LOOP_SAMPLE_MS).unref();
}

/** Every new TLS connection the workers open, counted as the `tls_connect` observation (a bench's wrap of tls.connect). */
function countConnections(count: (what: string) => void): void {
  const connect = tls.connect.bind(tls) as (...args: unknown[]) => tls.TLSSocket;
  (tls as { connect: unknown }).connect = (...args: unknown[]): tls.TLSSocket => {
    count('tls_connect');
    const socket = connect(...args);
    socket.once('secureConnect', () => count('tls_handshake_done'));
    return socket;
  };
}

/** Once the bench writes `markFile`, PROFILE_MS of this process's JavaScript are written to `outFile`. */
function profileOnMark(profile: NonNullable<WorkerHostPlan['profile']>): void {
  const poll = setInterval(() => {
    if (!existsSync(profile.markFile)) return;
    clearInterval(poll);
    const session = new Session();
    session.connect();
    session.post('Profiler.enable', () =>
      session.post('Profiler.start', () =>
        setTimeout(
          () =>
            session.post('Profiler.stop', (error, result) => {
              if (error === null) writeFileSync(profile.outFile, JSON.stringify(result.profile));
              session.disconnect();
            }),
          PROFILE_MS,
        ),
      ),
    );
  }, 100);
  poll.unref();
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
  const timeline: WorkerHostTimeline = { stopsToldMs: [], endsTakenMs: [], loopDelays: [], observations: {} };
  sampleLoopDelay(timeline.loopDelays);
  if (plan.profile !== undefined) profileOnMark(plan.profile);
  const observe = ({ what, code }: { readonly what: string; readonly code?: string }): void => {
    if (what === 'tick_stop_requested') timeline.stopsToldMs.push(Date.now());
    else if (what === 'completion_completed') timeline.endsTakenMs.push(Date.now());
    const second = String(Math.floor(Date.now() / 1000));
    const counts = (timeline.observations[second] ??= {});
    const key = code === undefined ? what : `${what}:${code}`;
    counts[key] = (counts[key] ?? 0) + 1;
  };
  countConnections((what) => observe({ what }));
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
