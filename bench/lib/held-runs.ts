// Shared by the benchmarks that hold many runs or measure idle processes: bounded waits, /proc
// counters (RSS, wake-ups), verified group kills, and running attempts seeded for a runner.
import * as fs from 'node:fs';
import * as path from 'node:path';

import Database from 'better-sqlite3';

import { signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { spawnGroupLeader, type SpawnedJob } from '../../lib/process/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function until(probe: () => boolean | Promise<boolean>, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`bench: ${what} did not happen within ${timeoutMs} ms`);
    await sleep(5);
  }
}

/** RSS (kB) and voluntary context switches summed over the threads, from /proc (a read, no signal). */
export function processCounters(pid: number): { rssKb: number; wakeups: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
  let wakeups = 0;
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      wakeups += Number(
        /^voluntary_ctxt_switches:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8'))?.[1] ??
          0,
      );
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return { rssKb, wakeups };
}

/** Verified SIGKILL of a group this benchmark started. */
export async function killGroup(identity: ProcessIdentity | null, exit: Promise<unknown>): Promise<void> {
  if (identity === null) return;
  if (signalVerified(identity, 'SIGKILL', { group: true }).kind === 'signalled') await exit;
}

/** The first row of a read on its own short connection (the writers are other processes). */
export function readRow<T>(file: string, sql: string, ...params: unknown[]): T | undefined {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(sql).get(...params) as T | undefined;
  } finally {
    db.close();
  }
}

export function count(file: string, sql: string, ...params: unknown[]): number {
  return readRow<{ n: number }>(file, sql, ...params)?.n ?? 0;
}

/** The id of the live `supervise` runner of a store, once it registered. */
export async function superviseRunnerId(file: string): Promise<string> {
  const ownRunner = "SELECT id FROM runners WHERE kind = 'supervise' AND ended_at_ms IS NULL";
  await until(() => readRow(file, ownRunner) !== undefined, 'the supervise to register');
  return (readRow<{ id: string }>(file, ownRunner) as { id: string }).id;
}

/**
 * A running attempt of `runnerId` for `job`, written as its admission would write it (claimed →
 * starting → running with pid and durable handle).
 */
export async function seedRunningAttempt(
  file: string,
  runnerId: string,
  runId: string,
  job: SpawnedJob,
  projectId = 'edge',
): Promise<void> {
  if (job.handle === null || job.child.pid === undefined) throw new Error('bench: the job did not start');
  const store = openSqliteStore(file);
  try {
    const attemptId = `${runId}-a1`;
    await store.runStore.createRun({ runId, projectId });
    await store.runStore.createAttempt({ runId, attemptId, runnerId });
    await store.runStore.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'starting' });
    await store.runStore.advanceAttempt({
      runId,
      attemptId,
      from: 'starting',
      to: 'running',
      pid: job.child.pid,
      handle: job.handle,
    });
  } finally {
    store.close();
  }
}

/**
 * `count` running attempts of `runnerId`, each a real idle process group (`sleep`) pushed onto
 * `jobs`; the pidfence launcher is left out (its own cost is bench/launcher-footprint.ts).
 */
export async function seedHeldRuns(file: string, runnerId: string, count: number, jobs: SpawnedJob[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const job = spawnGroupLeader('sleep', ['3600'], { stdio: 'ignore' });
    jobs.push(job);
    await seedRunningAttempt(file, runnerId, `idle-${i}`, job);
  }
}

interface Idler {
  readonly name: string;
  readonly job: SpawnedJob;
}

function idler(name: string, args: readonly string[], cwd: string): Idler {
  const job = spawnGroupLeader(process.execPath, args, { cwd, stdio: 'ignore' });
  if (job.identity === null) throw new Error(`bench: ${name} did not start`);
  return { name, job };
}

export interface IdleRow {
  readonly name: string;
  readonly rssKb: number;
  readonly wakeupsPerMinute: number;
}

export interface IdleWindow {
  readonly dir: string;
  /** The pidfence CLI (dist/lib/cli/main.js) and the package root it resolves `pidfence/*` from. */
  readonly cli: string;
  readonly cwd: string;
  readonly heldRuns: number;
  /** After the seeding, before the window: the supervise's first cycles and a GC have passed. */
  readonly settleMs: number;
  readonly idleMs: number;
}

/**
 * Idle RSS and wake-ups per minute, side by side over one window: a bare `node -e` holding a
 * better-sqlite3 database (WAL, the baseline, first row), the store and dispatch layer loaded, an
 * edge `pidfence supervise` with no runs, and one holding `heldRuns` idle runs.
 */
export async function idleRows(window: IdleWindow): Promise<IdleRow[]> {
  const { dir, cli: CLI, cwd, heldRuns: HELD_RUNS, settleMs: SETTLE_MS, idleMs: IDLE_MS } = window;
  const bareFile = path.join(dir, 'bare.db');
  const emptyFile = path.join(dir, 'empty.db');
  const heldFile = path.join(dir, 'held.db');
  openSqliteStore(emptyFile).close();
  openSqliteStore(heldFile).close();
  const supervise = (file: string): string[] => [CLI, 'supervise', '--db', file, '--profile', 'edge'];
  const idlers = [
    idler(
      'bare `node -e`: better-sqlite3 database open (WAL)',
      [
        '-e',
        `const db = new (require('better-sqlite3'))(${JSON.stringify(bareFile)}); db.pragma('journal_mode = WAL'); setInterval(() => {}, 2 ** 30);`,
      ],
      cwd,
    ),
    idler(
      'pidfence/sqlite store open + pidfence/dispatch loaded (no supervise, no runs)',
      [
        '-e',
        `require('pidfence/dispatch'); require('pidfence/sqlite').openSqliteStore(${JSON.stringify(path.join(dir, 'store.db'))}); setInterval(() => {}, 2 ** 30);`,
      ],
      cwd,
    ),
    idler('`pidfence supervise --profile edge`, no runs', supervise(emptyFile), cwd),
    idler(`\`pidfence supervise --profile edge\` holding ${HELD_RUNS} idle runs`, supervise(heldFile), cwd),
  ];
  const held: SpawnedJob[] = [];
  try {
    const runnerId = await superviseRunnerId(heldFile);
    await seedHeldRuns(heldFile, runnerId, HELD_RUNS, held);
    await sleep(SETTLE_MS);
    const before = idlers.map((one) => processCounters(one.job.child.pid as number));
    await sleep(IDLE_MS);
    const after = idlers.map((one) => processCounters(one.job.child.pid as number));
    if (count(heldFile, "SELECT count(*) AS n FROM attempts WHERE status = 'running'") !== HELD_RUNS)
      throw new Error('bench: the held runs did not stay running');
    return idlers.map((one, i) => ({
      name: one.name,
      rssKb: after[i]?.rssKb ?? Number.NaN,
      wakeupsPerMinute: (((after[i]?.wakeups ?? 0) - (before[i]?.wakeups ?? 0)) * 60_000) / IDLE_MS,
    }));
  } finally {
    for (const one of idlers) await killGroup(one.job.identity, one.job.exit);
    for (const job of held) await killGroup(job.identity, job.exit);
  }
}
