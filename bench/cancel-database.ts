// The database's share of a project-wide cancel (issue 29; docs/decisions/0445, 0446). Not a test.
// PIDFENCE_BENCH_CANCEL_DB_JOBS held runs (default 5,000), 50 per worker, pulled through the cluster
// lease store; the fleet's fault phase (STOPPED_BEFORE runs cancelled, stopped and ended) and the
// statistics autovacuum then keeps (ANALYZE); then the steps the fleet's control plane runs for a
// project cancel, without HTTP and without jobs: the cancel's one statement, every worker's stop page
// (its lease page, each stop claimed and settled), all at once on POOL connections as the fleet's
// two replicas of four connections answer them when the cancel's NOTIFY wakes every worker's page
// (docs/decisions/0448), and every worker's completion page, one after the other.
// PIDFENCE_BENCH_BASELINE=<another checkout, built with `npm run build`> runs the same steps with that
// checkout's stores and migrations on a database of its own, alternating with this tree's in one run.
// Run: npm run bench:cancel-database
import { createRequire } from 'node:module';
import path from 'node:path';

import { Pool } from 'pg';

import { holdJobs, type HeldWorker } from './lib/held-leases';
import { machineHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid } from './lib/table';

const JOBS = Number(process.env.PIDFENCE_BENCH_CANCEL_DB_JOBS ?? 5_000);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_CANCEL_DB_ROUNDS ?? 3);
const BASELINE = process.env.PIDFENCE_BENCH_BASELINE;
const PER_WORKER = 50;
/** Runs the fleet's fault phase cancels one by one before the project cancel (its 100 + 100). */
const STOPPED_BEFORE = 200;
/** The connections: the fleet's two in-process replicas, four each. */
const POOL = 8;

/** The modules one tree's build offers, loaded from its `dist`. */
interface Tree {
  readonly name: string;
  readonly cluster: typeof import('../lib/cluster/index');
  readonly postgres: typeof import('../lib/store/postgres/index');
  readonly databases: typeof import('../test/helpers/pg-store');
}

/** A tree's modules by path: the baseline is another checkout's build, not a package of ours. */
function treeAt(name: string, dist: string): Tree {
  const load = createRequire(__filename);
  return {
    name,
    cluster: load(path.join(dist, 'lib', 'cluster', 'index')) as Tree['cluster'],
    postgres: load(path.join(dist, 'lib', 'store', 'postgres', 'index')) as Tree['postgres'],
    databases: load(path.join(dist, 'test', 'helpers', 'pg-store')) as Tree['databases'],
  };
}

interface Timing {
  readonly cancelMs: number;
  /** From the first stop page to the last one's answer, all of them at once. */
  readonly stopWallMs: number;
  readonly stopPages: readonly number[];
  readonly completionPages: readonly number[];
}

/** Each worker's time for `work`, one worker after the other. */
async function perWorker<W>(workers: readonly W[], work: (worker: W) => Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (const worker of workers) {
    const started = performance.now();
    await work(worker);
    times.push(performance.now() - started);
  }
  return times;
}

/** Each worker's time for `work`, `lanes` workers at once. */
async function inLanes<W>(
  workers: readonly W[],
  lanes: number,
  work: (worker: W) => Promise<unknown>,
): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < workers.length) {
        const worker = workers[next++] as W;
        const started = performance.now();
        await work(worker);
        times.push(performance.now() - started);
      }
    }),
  );
  return times;
}

async function oneRound(tree: Tree): Promise<Timing> {
  const db = await tree.databases.migratedDatabase('cancel_db');
  const pool = new Pool({ connectionString: db.runtimeUrl, max: POOL });
  pool.on('error', () => undefined); // the database is dropped at the end
  try {
    const leases = new tree.cluster.ClusterLeaseStore(pool, new tree.postgres.PostgresExecutionStore(pool), {
      leaseDurationMs: 600_000,
    });
    const control = new tree.cluster.CancellationDispatchControl(
      leases,
      new tree.postgres.PostgresDispatchRepository(pool),
      {
        replicaOwnerId: 'cp-bench',
        leaseDurationMs: 10_000,
        availability: new tree.cluster.DispatchAvailability(10_000),
      },
    );
    const held = await holdJobs(leases, 'fleet', JOBS, { perWorker: PER_WORKER, projectId: 'fleet' });
    // Every lease renewed once, as the fleet's steady state leaves them.
    for (const worker of held) await control.tickPage(worker.caller, worker.refs);
    const runStore = new tree.postgres.PostgresRunStore(pool);
    const before = held.slice(0, STOPPED_BEFORE / PER_WORKER);
    for (const worker of before) {
      for (const ref of worker.refs)
        await runStore.requestCancellation({ runId: ref.runId, reason: 'user', eventId: `evt-fault-${ref.runId}` });
      await control.tickPage(worker.caller, worker.refs);
      await completeAll(leases, worker);
    }
    await db.admin.query('ANALYZE');
    const workers = held.slice(before.length);
    const started = performance.now();
    const cancelled = await runStore.requestProjectCancellation({ projectId: 'fleet', reason: 'user' });
    const cancelMs = performance.now() - started;
    const expected = JOBS - STOPPED_BEFORE;
    if (cancelled.requested !== expected) throw new Error(`the cancel requested ${cancelled.requested} of ${expected}`);
    const stopStarted = performance.now();
    // Every page at once: each claims, then waits for a connection to settle, as in the fleet.
    const stopPages = await inLanes(workers, workers.length, (worker) => control.tickPage(worker.caller, worker.refs));
    const stopWallMs = performance.now() - stopStarted;
    const completionPages = await perWorker(workers, (worker) => completeAll(leases, worker));
    return { cancelMs, stopWallMs, stopPages, completionPages };
  } finally {
    await pool.end();
    await db.dispose();
  }
}

/** A worker's page of ends: every run it holds cancelled by its stop. */
async function completeAll(
  leases: InstanceType<Tree['cluster']['ClusterLeaseStore']>,
  worker: HeldWorker,
): Promise<void> {
  const answers = await leases.completePage(
    worker.caller,
    worker.refs.map((ref) => ({
      runId: ref.runId,
      attemptId: ref.attemptId,
      fence: ref.fence,
      status: 'cancelled' as const,
      cause: 'stopped' as const,
      exit: { exitCode: null, signal: 'SIGTERM' },
    })),
  );
  if (answers.some((answer) => answer.kind !== 'completed')) throw new Error('an end was not completed');
}

function rowOf(tree: string, round: number, timing: Timing): string[] {
  const sum = (samples: readonly number[]): number => samples.reduce((a, b) => a + b, 0);
  const pages = (samples: readonly number[]): string =>
    `${(sum(samples) / 1000).toFixed(2)} s (p50 ${quantile([...samples], 0.5).toFixed(0)} ms, max ${Math.max(...samples).toFixed(0)} ms)`;
  const stops = `${(timing.stopWallMs / 1000).toFixed(2)} s (page p50 ${quantile([...timing.stopPages], 0.5).toFixed(0)} ms, max ${Math.max(...timing.stopPages).toFixed(0)} ms)`;
  return [tree, String(round), timing.cancelMs.toFixed(0), stops, pages(timing.completionPages)];
}

async function main(): Promise<void> {
  const trees = [treeAt('this tree', path.resolve(__dirname, '..'))];
  if (BASELINE !== undefined) trees.unshift(treeAt('baseline', path.join(path.resolve(BASELINE), 'dist')));
  const rows: string[][] = [];
  const totals = new Map<string, number[]>();
  for (let round = 1; round <= ROUNDS; round++)
    for (const tree of trees) {
      const timing = await oneRound(tree).catch((error: unknown) => error as Error);
      if (timing instanceof Error) {
        rows.push([tree.name, String(round), `failed: ${timing.message.slice(0, 120)}`, '', '']);
        continue;
      }
      rows.push(rowOf(tree.name, round, timing));
      const total = timing.cancelMs + timing.stopWallMs + timing.completionPages.reduce((a, b) => a + b, 0);
      totals.set(tree.name, [...(totals.get(tree.name) ?? []), total]);
    }
  console.log('## The database side of a project cancel');
  console.log('');
  console.log(machineHeader(['command: npm run bench:cancel-database']));
  console.log('');
  console.log(
    `${JOBS} held runs, ${PER_WORKER} per worker; ${STOPPED_BEFORE} of them cancelled, stopped and ended one by one, then ANALYZE; no HTTP and no jobs. Stop pages all at once on ${POOL} connections, completion pages one after the other.${BASELINE === undefined ? '' : ' Baseline: another checkout (PIDFENCE_BENCH_BASELINE), alternating with this tree.'}`,
  );
  console.log('');
  console.log(
    renderGrid(
      [
        'tree',
        'round',
        'cancel statement ms',
        `stop pages (claim + settle), all at once on ${POOL} connections`,
        'completion pages',
      ],
      rows,
      [false, true, true, true, true],
    ),
  );
  const median = (name: string): number => quantile(totals.get(name) ?? [], 0.5);
  if (BASELINE !== undefined)
    console.log(
      `\nall three steps, median of ${ROUNDS} rounds: baseline ${(median('baseline') / 1000).toFixed(2)} s, this tree ${(median('this tree') / 1000).toFixed(2)} s (${(median('this tree') / median('baseline')).toFixed(2)}x)`,
    );
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
