// A page's stops side by side (issue 29; docs/decisions/0350). Not a test. One run, side by side, on
// real SQLite stores with real process groups behind the real LocalProcessController: N running runs
// are cancelled and a Supervisor works them, cycle after cycle as a woken runner does, with the pages,
// grace and lease of a standalone runner (pages of 32, 5 s grace, pageLeaseMs), until every job is gone.
// Each N runs three times: with stopConcurrency 1 (the one-after-the-other order before 0350, kept
// only here as the baseline), 16, and the default (the whole claimed page). Two kinds of job: `sleep` (TERM ends it at once) and a
// shell that takes 250 ms after its TERM to exit (about the 0.28 s a job the issue measured on workers).
// Times run from the moment every cancel intent was committed (the cancels themselves are the same on
// both sides and are left out), on the monotonic clock.
// Run: npm run bench:page-stops (PIDFENCE_BENCH_PAGE_STOPS_SIZES, default 50,200)
import * as path from 'node:path';

import { Dispatcher, PROFILES, STOP_CONCURRENCY_DEFAULT, Supervisor, pageLeaseMs } from '../lib/dispatch/index';
import { ControllerRegistry } from '../lib/dispatch/index';
import { STOP_GRACE_DEFAULT_MS } from '../lib/execution/index';
import { LocalProcessController, spawnGroupLeader, type SpawnedJob } from '../lib/process/index';
import { openSqliteStore, type SqliteStore } from '../lib/store/sqlite/index';
import { cancelledRun } from '../test/helpers/cancelled-runs';
import { killGroup } from './lib/held-runs';
import { machineHeader, runBenchmark } from './lib/machine';
import { renderGrid } from './lib/table';

const SIZES = (process.env.PIDFENCE_BENCH_PAGE_STOPS_SIZES ?? '50,200').split(',').map((size) => Number(size));
const PROFILE = PROFILES.standalone;
const SHUTDOWN_MS = 250;

interface JobKind {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  /** The job says `ready` once its TERM handler is set. */
  readonly saysReady: boolean;
}

const KINDS: readonly JobKind[] = [
  { name: '`sleep` (TERM ends it)', command: 'sleep', args: ['3600'], saysReady: false },
  {
    name: `shell, ${SHUTDOWN_MS} ms to exit after TERM`,
    command: 'sh',
    // `wait` returns at a trapped signal; the group's TERM ends the background sleep too.
    args: ['-c', `trap 'sleep ${SHUTDOWN_MS / 1000}; exit 0' TERM; echo ready; sleep 3600 & wait`],
    saysReady: true,
  },
];

const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

interface Started {
  readonly job: SpawnedJob;
  /** Monotonic ms at the job's exit event. */
  readonly ended: Promise<number>;
}

function startJob(kind: JobKind): Promise<Started> {
  const job = spawnGroupLeader(kind.command, kind.args, {
    stdio: ['ignore', kind.saysReady ? 'pipe' : 'ignore', 'ignore'],
  });
  if (job.identity === null || job.handle === null) throw new Error('bench: a job did not start');
  const started = { job, ended: job.exit.then(() => monotonicMs()) };
  if (!kind.saysReady) return Promise.resolve(started);
  return new Promise((resolve) => job.child.stdout?.once('data', () => resolve(started)));
}

/** A running attempt with cancel intent for each job, as its admission and a cancel would leave it. */
async function seedCancelled(store: SqliteStore, jobs: readonly Started[]): Promise<void> {
  for (const [i, { job }] of jobs.entries())
    await cancelledRun(store.runStore, {
      runId: `run-${i}`,
      projectId: 'bench',
      running: { pid: job.child.pid as number, handle: job.handle as string },
    });
}

interface Measured {
  /** Cancel committed → the last TERM went out, ms. */
  readonly lastTermMs: number;
  /** Cancel committed → every job's exit seen, ms. */
  readonly allGoneMs: number;
}

/** N jobs of `kind`, cancelled and stopped by a supervisor whose dispatcher runs `stopConcurrency` stops at once. */
async function measure(dir: string, size: number, kind: JobKind, stopConcurrency: number): Promise<Measured> {
  const store = openSqliteStore(path.join(dir, `${size}-${KINDS.indexOf(kind)}-${stopConcurrency}.db`));
  const jobs: Started[] = [];
  try {
    for (let i = 0; i < size; i++) jobs.push(await startJob(kind));
    await seedCancelled(store, jobs);
    const terms: number[] = [];
    const controller = new LocalProcessController({
      onSignal: (signal) => {
        if (signal.signal === 'SIGTERM') terms.push(monotonicMs());
      },
    });
    const dispatcher = new Dispatcher({
      repository: store.dispatchRepository,
      runStore: store.runStore,
      controllers: new ControllerRegistry([controller]),
      graceMs: STOP_GRACE_DEFAULT_MS,
      leaseDurationMs: pageLeaseMs(controller.boundMs(STOP_GRACE_DEFAULT_MS), PROFILE.pageSize),
      stopConcurrency,
    });
    const supervisor = new Supervisor({
      repository: store.dispatchRepository,
      dispatcher,
      pageSize: PROFILE.pageSize,
      pagesPerCycle: 1,
    });
    const cancelled = monotonicMs();
    for (let report = await supervisor.runCycle(); report.items > 0; report = await supervisor.runCycle()) {
      if (report.dispatched !== report.items)
        throw new Error(`bench: a cycle did not stop its whole page: ${JSON.stringify(report)}`);
    }
    const ended = await Promise.all(jobs.map((started) => started.ended));
    if (terms.length !== size) throw new Error(`bench: ${terms.length} TERMs for ${size} jobs`);
    return { lastTermMs: Math.max(...terms) - cancelled, allGoneMs: Math.max(...ended) - cancelled };
  } finally {
    for (const { job } of jobs) await killGroup(job.identity, job.exit);
    store.close();
  }
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const ratio = (baseline: number, measured: number): string => `${(baseline / measured).toFixed(1)}x`;

/** The baseline (1: the order before 0350), half a page, and the default (the whole claimed page). */
const CONCURRENCIES = [1, PROFILE.pageSize / 2, STOP_CONCURRENCY_DEFAULT] as const;

/** One row: every concurrency on the same size and kind, one after the other. */
async function row(dir: string, size: number, kind: JobKind): Promise<string[]> {
  const measured: Measured[] = [];
  for (const concurrency of CONCURRENCIES) measured.push(await measure(dir, size, kind, concurrency));
  const [serial, ...sides] = measured as [Measured, ...Measured[]];
  return [
    String(size),
    kind.name,
    ...measured.map((m) => seconds(m.allGoneMs)),
    ...sides.map((m) => ratio(serial.allGoneMs, m.allGoneMs)),
    ...measured.map((m) => seconds(m.lastTermMs)),
  ];
}

async function main(dir: string): Promise<string[]> {
  const rows: string[][] = [];
  for (const size of SIZES) for (const kind of KINDS) rows.push(await row(dir, size, kind));
  const [, half] = CONCURRENCIES;
  const named = (what: string) => [`${what}, 1 at once`, `${what}, ${half}`, `${what}, page`];
  return [
    "## A page's stops side by side",
    '',
    machineHeader([
      `standalone runner's pages (${PROFILE.pageSize}), one page a cycle, cycles back to back; grace ${STOP_GRACE_DEFAULT_MS / 1000} s; lease pageLeaseMs(bound, ${PROFILE.pageSize}); one SQLite store per cell`,
      `stops of a claimed page in flight at once: 1 (one after the other, the order before docs/decisions/0350, kept only here as the baseline), ${half} (half a page, for comparison), page: the whole claimed page of ${PROFILE.pageSize} (the default, stopConcurrency ${STOP_CONCURRENCY_DEFAULT})`,
      "times from the moment every cancel intent was committed to every job's exit seen / the last TERM sent; one run per cell",
    ]),
    '',
    renderGrid(
      ['jobs', 'job', ...named('all gone'), `speed-up, ${half} vs 1`, 'speed-up, page vs 1', ...named('last TERM')],
      rows,
      [true, false, true, true, true, true, true, true, true, true],
    ),
  ];
}

runBenchmark('pidfence-page-stops-', main);
