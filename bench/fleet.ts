// The cluster at fleet scale (issue 29; docs/decisions/0200, 0201). Not a test.
// 1. The curve, from the wire: every worker's leases answered once, for 1 to 5,000 held jobs (50 per
//    worker), by the lease page of 0016 (one statement per worker) and by today's per-job tick kept
//    here as the baseline (a bench-local copy of main's transaction: lock run, attempt and lease,
//    touch the session, renew the lease). Round trips, commits and time per tick; per job per second
//    at a 1 s tick.
// 2. End to end (PIDFENCE_BENCH_FLEET_JOBS jobs, default 200, PIDFENCE_BENCH_FLEET_WORKERS workers,
//    default 10, PIDFENCE_BENCH_FLEET_PER_PROCESS workers per process, default 1, the jobs
//    PIDFENCE_BENCH_FLEET_JOB_NICE steps nicer than their worker, default 0, docs/decisions/0441): three control-plane
//    replicas in this process, `pidfence worker` processes (or worker-host processes of several
//    workers each) on loopback, each job a real process through the production launcher in a cgroup
//    subtree of its own (PIDFENCE_CGROUP); steady-state commits/s and CPU, cancel → TERM measured at
//    the job, and a project-wide cancel: TERM at the jobs, and every tree gone (the subtree empty).
// 3. Faults under that load (issue 29): a fourth replica address that accepts and never answers is
//    in every worker's list from the start, and a replica run as its own `pidfence control-plane`
//    process is SIGKILLed; cancels right after the kill, healthy jobs stopped, cancels lost.
// Run: npm run bench:fleet
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';

import { Pool } from 'pg';

import {
  CancellationDispatchControl,
  ClusterLeaseStore,
  ControlPlaneClient,
  DispatchAvailability,
  startControlPlane,
  type Assignment,
  type ControlPlane,
  type WorkerCaller,
} from '../lib/cluster/index';
import { signalVerified } from '../lib/native/index';
import {
  PostgresDispatchRepository,
  PostgresExecutionStore,
  PostgresGrantAdministration,
} from '../lib/store/postgres/index';
import { RUN_SQL } from '../lib/store/postgres/run-statements';
import { inTransaction } from '../lib/store/postgres/transaction';
import { makeCertificates, tlsFlags } from '../test/helpers/certificates';
import { spawnGroupLeader } from '../lib/process/index';
import { CGROUP_ENV, cgroup2Mount } from '../lib/process/job-cgroup';
import { withBenchDatabase } from './lib/dispatch-postgres';
import { timelineFileOf, type WorkerHostPlan, type WorkerHostTimeline } from './lib/worker-host';
import { holdJobs } from './lib/held-leases';
import { machineHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid } from './lib/table';
import { tallyWire, wireSince } from '../test/helpers/wire-tally';

const CLI = path.resolve(__dirname, '..', 'lib', 'cli', 'main.js');
const PER_WORKER = 50;
const CURVE = [1, 10, 100, 1_000, 5_000];
const LEASE_MS = 600_000;
const E2E_JOBS = Number(process.env.PIDFENCE_BENCH_FLEET_JOBS ?? 200);
const E2E_WORKERS = Number(process.env.PIDFENCE_BENCH_FLEET_WORKERS ?? 10);
/** Workers per process: 1 runs `pidfence worker` processes; more share a worker-host process each. */
const PER_PROCESS = Number(process.env.PIDFENCE_BENCH_FLEET_PER_PROCESS ?? 1);
const WORKER_HOST = path.resolve(__dirname, 'lib', 'worker-host.js');
/** The workers' --job-nice (docs/decisions/0441): 0, the default; its jobs sleep, so their priority did not matter (docs/benchmarks.md). */
const JOB_NICE = Number(process.env.PIDFENCE_BENCH_FLEET_JOB_NICE ?? 0);
/** Single cancels in each fault phase (PIDFENCE_BENCH_FLEET_CANCELS): more of them find a rare slow one. */
const CANCELS = Number(process.env.PIDFENCE_BENCH_FLEET_CANCELS ?? 20);
const SUBMIT_LANES = 8;
/** The issue's target for a project-wide cancel: every job's tree gone within this many seconds. */
const PROJECT_TARGET_S = 15;
/** The operator's requests may queue behind a loaded machine's start-up; they are not what is measured. */
const OPERATOR_TIMEOUT_MS = 120_000;
const SKIP_CURVE = process.env.PIDFENCE_BENCH_FLEET_CURVE === '0';
/** Set to a file: `perf record -a -g` of the machine for the 10 s from the project cancel's request (a profile, not a number). */
const PROFILE_FILE = process.env.PIDFENCE_BENCH_FLEET_PROFILE;
/**
 * Set to a file: which statements PostgreSQL's backends (autovacuum's too) were running, sampled every
 * 10 ms from the project cancel's request (a profile of the database by statement, not a number).
 */
const SQL_SAMPLE_FILE = process.env.PIDFENCE_BENCH_FLEET_SQL_SAMPLE;
/**
 * Set to milliseconds: the plan of every statement (nested ones in SQL functions too) that ran longer
 * is written to the PostgreSQL server's log by auto_explain, with its actual rows (a profile, not a number).
 */
const EXPLAIN_MS = process.env.PIDFENCE_BENCH_FLEET_EXPLAIN_MS;
/** How long the statement sample lasts from the project cancel's request (PIDFENCE_BENCH_FLEET_SQL_SAMPLE_S, default 10). */
const SQL_SAMPLE_MS = Number(process.env.PIDFENCE_BENCH_FLEET_SQL_SAMPLE_S ?? 10) * 1000;
/** Set to a file: the first worker host's JavaScript, profiled for 15 s from the project cancel's request (a .cpuprofile). */
const HOST_PROFILE_FILE = process.env.PIDFENCE_BENCH_FLEET_HOST_PROFILE;

/** main's per-job tick (f1d0cfa), kept only here as the baseline: 5 statements in one transaction. */
const OLD_TICK = {
  lockAttempt:
    'SELECT status, deadline_at_ms AS "deadlineAtMs" FROM attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE',
  lockLease: 'SELECT run_id, fence, expires_at_ms FROM run_dispatch_leases WHERE run_id = $1 FOR NO KEY UPDATE',
  touchSession:
    'UPDATE worker_sessions SET last_seen_at_ms = floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint WHERE id = $1 AND principal = $2 AND ended_at_ms IS NULL RETURNING id',
  renewLease: `UPDATE run_dispatch_leases SET expires_at_ms = floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint + $2::bigint,
    updated_at_ms = floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint WHERE run_id = $1 AND fence = $3 AND released_at_ms IS NULL RETURNING run_id`,
};

/** Runs `work` for each item, `lanes` at a time. */
async function inLanes<T>(items: readonly T[], lanes: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

async function oldTick(pool: Pool, caller: WorkerCaller, ref: Assignment): Promise<void> {
  await inTransaction(pool, 'benchOldTick', async (tx) => {
    await tx.rows(RUN_SQL.lockRun, [ref.runId]);
    await tx.rows(OLD_TICK.lockAttempt, [ref.runId, ref.attemptId]);
    await tx.rows(OLD_TICK.lockLease, [ref.runId]);
    await tx.rows(OLD_TICK.touchSession, [caller.sessionId, caller.principal]);
    await tx.rows(OLD_TICK.renewLease, [ref.runId, LEASE_MS, ref.fence]);
  });
}

/** One tick of every worker, both ways, for each size of the curve. */
async function curve(runtimeUrl: string): Promise<string[][]> {
  const pool = new Pool({ connectionString: runtimeUrl, max: 4 });
  const wire = tallyWire(pool);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: LEASE_MS });
  const control = new CancellationDispatchControl(leases, new PostgresDispatchRepository(pool), {
    replicaOwnerId: 'cp-bench',
    leaseDurationMs: 10_000,
    availability: new DispatchAvailability(10_000),
  });
  const rows: string[][] = [];
  try {
    for (const jobs of CURVE) {
      const workers = await holdJobs(leases, `c${jobs}`, jobs, { perWorker: PER_WORKER, projectId: 'bench' });
      const refs = workers.flatMap((w) => w.refs.map((ref) => ({ caller: w.caller, ref })));
      await control.tickPage(workers[0]?.caller as WorkerCaller, workers[0]?.refs ?? []);
      const measure = async (name: string, once: () => Promise<void>): Promise<void> => {
        const before = { ...wire };
        const started = performance.now();
        await once();
        const ms = performance.now() - started;
        const spent = wireSince(before, wire);
        const commits = name === 'page' ? workers.length : refs.length;
        rows.push([
          String(jobs),
          String(workers.length),
          name,
          (spent.roundTrips / jobs).toFixed(3),
          String(spent.roundTrips),
          String(commits),
          ms.toFixed(0),
          (ms / jobs).toFixed(3),
        ]);
      };
      await measure('per-job (main)', () => inLanes(refs, 4, ({ caller, ref }) => oldTick(pool, caller, ref)));
      await measure('page', () => inLanes(workers, 4, (w) => control.tickPage(w.caller, w.refs)));
    }
  } finally {
    await pool.end();
  }
  return rows;
}

/** Commits on this database so far (pg_stat_database; the statistics collector lags up to 0.5 s). */
async function commitsSoFar(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ commits: string }>(
    'SELECT pg_stat_get_db_xact_commit(oid) AS commits FROM pg_database WHERE datname = current_database()',
  );
  return Number(rows[0]?.commits ?? 0);
}

/**
 * Transaction ids assigned so far: one per transaction that wrote (a read-only statement gets none).
 * Counted server-wide, so it holds for this run only on a server nothing else writes to.
 */
async function writesSoFar(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ next: string }>('SELECT txid_snapshot_xmax(txid_current_snapshot()) AS next');
  return Number(rows[0]?.next ?? 0);
}

/** When the jobs `from`..`to - 1` handled TERM, from their markers' mtimes, after `sentAtMs` (epoch ms). */
function termAfter(marker: (i: number) => string, from: number, to: number, sentAtMs: number): string {
  const after: number[] = [];
  for (let i = from; i < to; i++) if (existsSync(marker(i))) after.push(statSync(marker(i)).mtimeMs - sentAtMs);
  const s = (ms: number): string => (ms / 1000).toFixed(1);
  return `project-wide cancel → TERM at the job (${after.length} of ${to - from}): p50 ${s(quantile(after, 0.5))} s, p99 ${s(quantile(after, 0.99))} s, last ${s(Math.max(...after))} s after the request was sent`;
}

/** A replica address that accepts connections and never answers (a blackholed replica). */
async function blackhole(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `https://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A replica as its own `pidfence control-plane` process, so it can be SIGKILLed; its URL once it listens. */
async function replicaProcess(
  runtimeUrl: string,
  certs: ReturnType<typeof makeCertificates>,
): Promise<{ url: string; leader: ReturnType<typeof spawnGroupLeader> }> {
  const leader = spawnGroupLeader(
    process.execPath,
    [
      CLI,
      'control-plane',
      '--db',
      runtimeUrl,
      ...tlsFlags(certs.server, certs.ca),
      '--port',
      '0',
      '--replica-id',
      'cp-bench-killed',
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const stdout = (leader.child as unknown as { stdout: NodeJS.ReadableStream }).stdout;
  const url = await new Promise<string>((resolve, reject) => {
    let seen = '';
    stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const found = /listening on (\S+)/.exec(seen);
      if (found) resolve(found[1] as string);
    });
    void leader.exit.then(() => reject(new Error(`the replica process ended before it listened: ${seen}`)));
  });
  stdout.resume();
  return { url, leader };
}

/** One cancel: its TERM latency at the job, and how long the operator's request took to be answered, in ms. */
interface CancelTiming {
  readonly termMs: number;
  readonly answeredMs: number;
}

/** Cancels runs from..to one after another; each one's timing (a lost one is absent). */
async function cancelEach(
  operator: ControlPlaneClient,
  marker: (i: number) => string,
  from: number,
  to: number,
): Promise<CancelTiming[]> {
  const timings: CancelTiming[] = [];
  for (let i = from; i < to; i++) {
    // The wall clock only to compare with the marker's mtime; the request's own time on the monotonic one.
    const sent = Date.now();
    const requested = performance.now();
    await operator.send('POST', `/v1/runs/fleet-${i}/cancel`, undefined, OPERATOR_TIMEOUT_MS);
    const answeredMs = Math.round(performance.now() - requested);
    const until = performance.now() + 15_000;
    while (!existsSync(marker(i)) && performance.now() < until) await new Promise((r) => setTimeout(r, 2));
    if (existsSync(marker(i))) timings.push({ termMs: Math.round(statSync(marker(i)).mtimeMs - sent), answeredMs });
    await new Promise((r) => setTimeout(r, 200 + Math.random() * 800));
  }
  return timings;
}

function latencyLine(what: string, timings: readonly CancelTiming[], of: number): string {
  const latencies = timings.map((timing) => timing.termMs);
  const max = Math.max(...latencies);
  const slowest = latencies.indexOf(max);
  // Which cancel was slowest (1-based, in the order sent; a first one points at a cold path), and how
  // much of it was the operator's request itself (the intent's commit) rather than the push to the job.
  return `${what} (${latencies.length} of ${of}): p50 ${quantile(latencies, 0.5)} ms, p99 ${quantile(latencies, 0.99)} ms, over 1 s: ${latencies.filter((ms) => ms > 1_000).length}, max ${max} ms (cancel ${slowest + 1}, its request answered after ${timings[slowest]?.answeredMs} ms)`;
}

/**
 * The jobs' own cgroup subtree (PIDFENCE_CGROUP for the workers): nothing else lives in it, so its
 * `populated 0` is the moment every job's process tree is gone, whatever each job did with TERM.
 */
function jobSubtree(): string {
  const mount = cgroup2Mount();
  if (mount === null) throw new Error('bench/fleet needs a cgroup2 mount (root): the jobs run in their own cgroups');
  const subtree = path.join(mount, `pidfence-bench-fleet-${process.pid}`);
  mkdirSync(subtree);
  return subtree;
}

/** Whether a live process is in the cgroup; one removed meanwhile (its launcher's rmdir) holds none. */
function populated(directory: string): boolean {
  try {
    return /^populated 1$/m.test(readFileSync(path.join(directory, 'cgroup.events'), 'utf8'));
  } catch (error) {
    // A launcher may remove its cgroup while this reads it: ENODEV once the directory is being removed.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENODEV') return false;
    throw error;
  }
}

/** What the workers left in the subtree is killed through cgroup.kill (never a PID), then every directory removed. */
async function removeJobSubtree(subtree: string): Promise<void> {
  if (populated(subtree)) writeFileSync(path.join(subtree, 'cgroup.kill'), '1');
  for (let turn = 0; populated(subtree) && turn < 200; turn += 1) await new Promise((r) => setTimeout(r, 50));
  for (const entry of readdirSync(subtree, { withFileTypes: true }))
    if (entry.isDirectory()) rmdirIfThere(path.join(subtree, entry.name));
  rmdirSync(subtree);
}

/** A job's launcher may remove its cgroup at any moment: one already gone is fine. */
function rmdirIfThere(directory: string): void {
  try {
    rmdirSync(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Job cgroups of the subtree with a live process in them now. */
function populatedJobs(subtree: string): number {
  let count = 0;
  for (const entry of readdirSync(subtree, { withFileTypes: true }))
    if (entry.isDirectory() && populated(path.join(subtree, entry.name))) count += 1;
  return count;
}

/**
 * Seconds from `startMs` (performance.now()) until the subtree is empty, looked at every 50 ms, and how
 * many job trees were left `checkAfterS` seconds after the start.
 */
async function treesGone(
  subtree: string,
  startMs: number,
  checkAfterS: number,
  limitS: number,
): Promise<{ goneS: number | null; leftAtCheck: number }> {
  let leftAtCheck = 0;
  let checked = false;
  while (performance.now() - startMs < limitS * 1000) {
    if (!populated(subtree)) return { goneS: (performance.now() - startMs) / 1000, leftAtCheck };
    if (!checked && performance.now() - startMs >= checkAfterS * 1000) {
      leftAtCheck = populatedJobs(subtree);
      checked = true;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { goneS: null, leftAtCheck };
}

/** A process's user and system CPU seconds (its own, not its children's) from its /proc stat line. */
function cpuSecondsOfStat(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime (fields 14 and 15 of proc(5)), USER_HZ
}

/** User and system CPU seconds the processes used so far (their own, not their children's), from /proc. */
function cpuSecondsOf(processes: ReadonlyArray<ReturnType<typeof spawnGroupLeader>>): number {
  let seconds = 0;
  for (const leader of processes)
    if (leader.identity !== null)
      seconds += cpuSecondsOfStat(readFileSync(`/proc/${leader.identity.pid}/stat`, 'utf8'));
  return seconds;
}

/** CPU seconds so far, by who spent them, for the project cancel's account. */
interface CpuAccount {
  readonly machine: number;
  readonly hosts: number;
  readonly replicas: number;
  readonly postgres: number;
  readonly jobs: number;
}

/** The machine's busy CPU seconds so far (every CPU, idle and iowait left out), from /proc/stat. */
function machineBusySeconds(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields as number[];
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / 100;
}

/** CPU seconds so far of every live process named `comm` (one that exits meanwhile is skipped). */
function cpuSecondsNamed(comm: string): number {
  let seconds = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === comm) seconds += cpuSecondsOfStat(stat);
  }
  return seconds;
}

/** The jobs' cgroup subtree's CPU seconds so far: every job's shell and sleep, exited ones too. */
function subtreeCpuSeconds(subtree: string): number {
  const usage = /^usage_usec (\d+)$/m.exec(readFileSync(path.join(subtree, 'cpu.stat'), 'utf8'));
  return Number(usage?.[1] ?? 0) / 1e6;
}

function cpuAccountNow(workers: ReadonlyArray<ReturnType<typeof spawnGroupLeader>>, subtree: string): CpuAccount {
  const own = process.cpuUsage();
  return {
    machine: machineBusySeconds(),
    hosts: cpuSecondsOf(workers),
    replicas: (own.user + own.system) / 1e6,
    postgres: cpuSecondsNamed('postgres'),
    jobs: subtreeCpuSeconds(subtree),
  };
}

/** Where the project cancel's CPU went, from `before` to now: seconds each, and the rest. */
function cpuAccountLine(before: CpuAccount, after: CpuAccount, seconds: number): string {
  const spent = (key: keyof CpuAccount): number => after[key] - before[key];
  const named = spent('hosts') + spent('replicas') + spent('postgres') + spent('jobs');
  const part = (label: string, value: number): string =>
    `${label} ${value.toFixed(1)} s (${((value / spent('machine')) * 100).toFixed(0)} %)`;
  return `project-wide cancel → CPU over its ${seconds.toFixed(1)} s: the machine ${spent('machine').toFixed(1)} CPU-s busy of ${(seconds * availableParallelism()).toFixed(1)} on ${availableParallelism()} CPUs; ${[
    part('worker hosts', spent('hosts')),
    part('this process (2 replicas, the bench)', spent('replicas')),
    part('postgres', spent('postgres')),
    part("the jobs' shells and sleeps", spent('jobs')),
    part('the rest (launchers, kernel threads)', spent('machine') - named),
  ].join('; ')}`;
}

/**
 * The workers: one `pidfence worker` process each, or PER_PROCESS workers in each worker-host process
 * (each with its own certificate, session and journal; docs/benchmarks.md says which a run used).
 */
function startWorkers(
  urls: readonly string[],
  certs: ReturnType<typeof makeCertificates>,
  scratch: string,
  subtree: string,
): Array<ReturnType<typeof spawnGroupLeader>> {
  const env = { ...process.env, [CGROUP_ENV]: subtree };
  const capacity = Math.ceil(E2E_JOBS / E2E_WORKERS);
  const journal = (w: number): string => path.join(scratch, `w${w}.db`);
  if (PER_PROCESS === 1)
    return Array.from({ length: E2E_WORKERS }, (_, w) =>
      spawnGroupLeader(
        process.execPath,
        [CLI, 'worker', '--control-plane', ...urls, ...tlsFlags(certs.client(`bench-worker-${w}`), certs.ca)].concat([
          '--journal',
          journal(w),
          '--capacity',
          String(capacity),
          '--tick',
          '1s',
          '--grace',
          '2s',
          '--job-nice',
          String(JOB_NICE),
        ]),
        { stdio: 'ignore', env },
      ),
    );
  return Array.from({ length: Math.ceil(E2E_WORKERS / PER_PROCESS) }, (_, h) => {
    const members = Array.from({ length: Math.min(PER_PROCESS, E2E_WORKERS - h * PER_PROCESS) }, (_, i) => {
      const w = h * PER_PROCESS + i;
      const pem = certs.client(`bench-worker-${w}`);
      return { cert: pem.certPath, key: pem.keyPath, journal: journal(w) };
    });
    const plan: WorkerHostPlan = {
      urls,
      ca: certs.ca.certPath,
      capacity,
      tickMs: 1_000,
      graceMs: 2_000,
      jobNice: JOB_NICE,
      workers: members,
      ...(h === 0 && HOST_PROFILE_FILE !== undefined
        ? { profile: { markFile: profileMarkOf(scratch), outFile: path.resolve(HOST_PROFILE_FILE) } }
        : {}),
    };
    const file = path.join(scratch, `host-${h}.json`);
    writeFileSync(file, JSON.stringify(plan));
    return spawnGroupLeader(process.execPath, [WORKER_HOST, file], { stdio: 'ignore', env });
  });
}

/** The file whose appearance starts the first worker host's profile (PIDFENCE_BENCH_FLEET_HOST_PROFILE). */
function profileMarkOf(scratch: string): string {
  return path.join(scratch, 'host-profile.mark');
}

/** How many of the fleet project's runs have one of `statuses`. */
async function fleetRunsIn(owner: Pool, statuses: readonly string[]): Promise<number> {
  const { rows } = await owner.query<{ n: string }>(
    "SELECT count(*) AS n FROM runs WHERE project_id = 'fleet' AND status = ANY($1::text[])",
    [statuses],
  );
  return Number(rows[0]?.n ?? 0);
}

/** The project cancel's profile: perf's own process, ended by its `sleep`; resolves when it has written. */
function profileFrom(file: string | undefined): Promise<void> {
  if (file === undefined) return Promise.resolve();
  const perf = spawn('perf', ['record', '-e', 'cpu-clock', '-a', '-g', '-o', file, 'sleep', '10'], { stdio: 'ignore' });
  return new Promise((resolve) => {
    perf.once('exit', () => resolve());
    perf.once('error', () => resolve());
  });
}

/**
 * The project cancel's statement profile: each 10 ms, the statements the bench database's backends
 * were running, counted by their text's first 200 characters and what they waited on (`cpu` when
 * nothing); written to `file`, the most seen first.
 */
async function sampleStatementsInto(admin: Pool, file: string | undefined): Promise<void> {
  if (file === undefined) return;
  // The superuser's connection: another role's statement text reads `<insufficient privilege>`.
  const client = await admin.connect();
  const seen = new Map<string, number>();
  let samples = 0;
  try {
    const end = performance.now() + SQL_SAMPLE_MS;
    while (performance.now() < end) {
      const { rows } = await client.query<{ statement: string; waiting: string | null }>(
        `SELECT backend_type || ': ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 200) AS statement, wait_event_type AS waiting
          FROM pg_stat_activity
          WHERE pid <> pg_backend_pid() AND (state = 'active' OR (backend_type <> 'client backend' AND query <> ''))`,
      );
      samples += 1;
      for (const row of rows) {
        const key = `${row.waiting ?? 'cpu'}\t${row.statement}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    client.release();
  }
  const lines = [...seen].sort((a, b) => b[1] - a[1]).map(([key, n]) => `${n}\t${key}`);
  writeFileSync(file, `${samples} samples\n${lines.join('\n')}\n`);
}

/** A setting for every later connection to the bench database (a superuser's ALTER DATABASE). */
async function setForDatabase(admin: Pool, setting: string): Promise<void> {
  const quoted = setting.replaceAll("'", "''");
  await admin.query(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET ${quoted}', current_database()); END $$`);
}

/** Per SQL function: calls and milliseconds (self), from pg_stat_user_functions (track_functions = 'pl'). */
async function functionStats(admin: Pool): Promise<Map<string, { calls: number; selfMs: number }>> {
  const { rows } = await admin.query<{ name: string; calls: string; self: number }>(
    'SELECT funcname AS name, calls, self_time AS self FROM pg_stat_user_functions',
  );
  return new Map(rows.map((row) => [row.name, { calls: Number(row.calls), selfMs: row.self }]));
}

/** The SQL functions' calls and self time between two readings, written after the statement sample. */
function appendFunctionStats(
  file: string,
  before: Map<string, { calls: number; selfMs: number }>,
  after: Map<string, { calls: number; selfMs: number }>,
): void {
  const lines = [...after]
    .map(([name, now]) => {
      const then = before.get(name) ?? { calls: 0, selfMs: 0 };
      return { name, calls: now.calls - then.calls, selfMs: now.selfMs - then.selfMs };
    })
    .filter((row) => row.calls > 0)
    .sort((a, b) => b.selfMs - a.selfMs)
    .map((row) => `${row.selfMs.toFixed(0)} ms\t${row.calls} calls\t${row.name}`);
  writeFileSync(
    file,
    `\nSQL functions from the request until every tree was gone (self time):\n${lines.join('\n')}\n`,
    {
      flag: 'a',
    },
  );
}

/** How long after the project cancel the worker hosts' event-loop delays and observations are summed up. */
const LOOP_WINDOW_MS = 30_000;
/** What every tick, stop and end is observed as: the tally leaves them out. */
const ROUTINE_OBSERVATIONS = new Set(['page_live', 'tick_renewed', 'tick_stop_requested', 'completion_completed']);

/**
 * When the worker-host processes were told of the project cancel's stops, and had the runs' ends
 * taken, after the request was sent: the delivery and the bookkeeping, beside TERM at the job.
 */
function workerTimeline(scratch: string, sentMs: number | null): string[] {
  if (sentMs === null || PER_PROCESS === 1) return [];
  const told: number[] = [];
  const taken: number[] = [];
  const loopBefore: number[] = [];
  const loopDuring: number[] = [];
  const seenBefore = new Map<string, number>();
  const seenDuring = new Map<string, number>();
  for (const name of readdirSync(scratch).filter((entry) => /^host-\d+\.json$/.test(entry))) {
    const file = timelineFileOf(path.join(scratch, name));
    if (!existsSync(file)) continue;
    const timeline = JSON.parse(readFileSync(file, 'utf8')) as WorkerHostTimeline;
    told.push(...timeline.stopsToldMs.filter((ms) => ms >= sentMs).map((ms) => ms - sentMs));
    taken.push(...timeline.endsTakenMs.filter((ms) => ms >= sentMs).map((ms) => ms - sentMs));
    for (const [ms, delay] of timeline.loopDelays)
      if (ms < sentMs && ms >= sentMs - 10_000) loopBefore.push(delay);
      else if (ms >= sentMs && ms < sentMs + LOOP_WINDOW_MS) loopDuring.push(delay);
    for (const [second, counts] of Object.entries(timeline.observations)) {
      const ms = Number(second) * 1000;
      const into =
        ms < sentMs && ms >= sentMs - LOOP_WINDOW_MS
          ? seenBefore
          : ms >= sentMs && ms < sentMs + LOOP_WINDOW_MS
            ? seenDuring
            : null;
      for (const [key, n] of Object.entries(counts)) into?.set(key, (into.get(key) ?? 0) + n);
    }
  }
  const tally = (seen: Map<string, number>): string =>
    [...seen]
      .filter(([key]) => !ROUTINE_OBSERVATIONS.has(key))
      .sort((a, b) => b[1] - a[1])
      .map(([key, n]) => `${key} ${n}`)
      .join(', ') || 'none';
  const delays = (samples: number[]): string =>
    samples.length === 0
      ? 'none'
      : `p50 ${quantile(samples, 0.5)} ms, p90 ${quantile(samples, 0.9)} ms, max ${Math.max(...samples)} ms`;
  const s = (ms: number): string => (ms / 1000).toFixed(1);
  const spread = (samples: number[]): string =>
    samples.length === 0
      ? 'none'
      : `p50 ${s(quantile(samples, 0.5))} s, p99 ${s(quantile(samples, 0.99))} s, last ${s(Math.max(...samples))} s`;
  return [
    `project-wide cancel → stops told to the workers (${told.length}): ${spread(told)} after the request was sent`,
    `project-wide cancel → ends taken by the control plane (${taken.length}): ${spread(taken)} after the request was sent`,
    `worker hosts' event loop, longest delay in each 0.5 s: the 10 s before the project cancel ${delays(loopBefore)}; the ${LOOP_WINDOW_MS / 1000} s after it ${delays(loopDuring)}`,
    `the workers' observations other than routine ones, the ${LOOP_WINDOW_MS / 1000} s before the project cancel: ${tally(seenBefore)}; the ${LOOP_WINDOW_MS / 1000} s after it: ${tally(seenDuring)}`,
  ];
}

export async function endToEnd(runtimeUrl: string, ownerUrl: string, admin: Pool): Promise<string[]> {
  const certs = makeCertificates();
  const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-fleet-'));
  // Set before any replica connects: the function counts for the statement sample, and auto_explain.
  if (SQL_SAMPLE_FILE !== undefined) await setForDatabase(admin, "track_functions = 'pl'");
  if (EXPLAIN_MS !== undefined)
    for (const setting of [
      "session_preload_libraries = 'auto_explain'",
      `auto_explain.log_min_duration = ${Number(EXPLAIN_MS)}`,
      'auto_explain.log_nested_statements = on',
      'auto_explain.log_analyze = on',
      'auto_explain.log_timing = off',
    ])
      await setForDatabase(admin, setting);
  const owner = new Pool({ connectionString: ownerUrl, max: 2 });
  for (const permission of ['run.read', 'run.stop'] as const)
    await new PostgresGrantAdministration(owner).writeGrant(
      { subject: 'bench-operator', projectId: 'fleet', permission },
      'bench',
    );
  const planes: ControlPlane[] = [];
  for (let i = 0; i < 3; i++)
    planes.push(
      await startControlPlane({
        databaseUrl: runtimeUrl,
        tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert },
        replicaOwnerId: `cp-bench-${i}`,
        maxConnections: 4,
      }),
    );
  const killable = await replicaProcess(runtimeUrl, certs);
  const silent = await blackhole();
  const urls = [...planes.map((plane) => plane.url), killable.url, silent.url];
  const pem = certs.client('bench-operator');
  const operator = new ControlPlaneClient(urls[0] as string, { cert: pem.cert, key: pem.key, ca: certs.ca.cert });
  const subtree = jobSubtree();
  const workers = startWorkers(urls, certs, scratch, subtree);
  const lines: string[] = [];
  let projectSentMs: number | null = null;
  try {
    const marker = (i: number): string => path.join(scratch, `job-${i}.term`);
    // Submitted 8 at a time: one after the other, 5,000 submissions took longer than the jobs' start.
    const submitStart = performance.now();
    await inLanes(
      Array.from({ length: E2E_JOBS }, (_, i) => i),
      SUBMIT_LANES,
      async (i) => {
        // The marker's mtime is the moment the job handled TERM (a shell builtin writes it: jobs get no PATH).
        const argv = ['sh', '-c', `trap 'echo term > ${marker(i)}; exit 143' TERM; sleep 900 & wait`];
        await operator.send('POST', '/v1/jobs', { runId: `fleet-${i}`, projectId: 'fleet', argv }, OPERATOR_TIMEOUT_MS);
      },
    );
    const running = (): Promise<number> => fleetRunsIn(owner, ['running']);
    const submittedS = (performance.now() - submitStart) / 1000;
    const rampStart = performance.now();
    const queued = (): Promise<number> => fleetRunsIn(owner, ['queued']);
    while ((await queued()) > 0 && performance.now() - rampStart < 600_000)
      await new Promise((r) => setTimeout(r, 500));
    const assignedS = (performance.now() - rampStart) / 1000;
    // A run is `running` once a worker pulled it; its job starts after. The measurements below begin
    // only when every running run's process tree is there, so no launch is still under way. A run
    // whose pull answer never reached its worker ends never_started meanwhile (docs/decisions/0434).
    while (populatedJobs(subtree) < (await running()) && performance.now() - rampStart < 600_000)
      await new Promise((r) => setTimeout(r, 1_000));
    const neverStarted = E2E_JOBS - (await running());
    lines.push(
      `ramp: ${E2E_JOBS} submitted in ${submittedS.toFixed(1)} s; every run assigned ${assignedS.toFixed(1)} s later; ${populatedJobs(subtree)} job trees running ${((performance.now() - rampStart) / 1000).toFixed(1)} s after the submissions; ${neverStarted} runs ended never_started (their pull's answer never reached the worker)`,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const c0 = await commitsSoFar(owner);
    const w0 = await writesSoFar(owner);
    const cpu0 = process.cpuUsage();
    const workersCpu0 = cpuSecondsOf(workers);
    const postgresCpu0 = cpuSecondsNamed('postgres');
    const killableCpu0 = cpuSecondsOf([killable.leader]);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 10_000));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const workersCpu = cpuSecondsOf(workers) - workersCpu0;
    const postgresCpu = cpuSecondsNamed('postgres') - postgresCpu0;
    // The two replicas in this process (with the bench's own small share) and the third, its own process.
    const replicasCpu = (cpu.user + cpu.system) / 1e6 + cpuSecondsOf([killable.leader]) - killableCpu0;
    const commits = (await commitsSoFar(owner)) - c0;
    const writes = (await writesSoFar(owner)) - w0;
    lines.push(
      `steady state, ${E2E_JOBS} jobs, ${E2E_WORKERS} workers, 3 replicas, 1 s tick: ${(commits / seconds).toFixed(0)} commits/s (every transaction, a read-only statement too), of which ${(writes / seconds).toFixed(0)} wrote; the 3 replicas' CPU ${(replicasCpu / seconds).toFixed(2)} cores; the worker processes' CPU ${(workersCpu / seconds).toFixed(2)} cores (${((workersCpu / seconds / E2E_WORKERS) * 1000).toFixed(1)} ms per worker per second); PostgreSQL's ${(postgresCpu / seconds).toFixed(2)} cores`,
    );
    lines.push(
      latencyLine(
        'cancel → TERM at the job, one replica address silent',
        await cancelEach(operator, marker, 0, CANCELS),
        CANCELS,
      ),
    );
    signalVerified(killable.leader.identity!, 'SIGKILL', { group: false });
    await killable.leader.exit;
    const afterKill = await cancelEach(operator, marker, CANCELS, 2 * CANCELS);
    lines.push(
      latencyLine('cancel → TERM at the job right after a replica was SIGKILLed, one silent', afterKill, CANCELS),
      `cancels lost across the faults: ${CANCELS - afterKill.length} of ${CANCELS}`,
    );
    let healthyStopped = 0;
    for (let i = 2 * CANCELS; i < E2E_JOBS; i++) if (existsSync(marker(i))) healthyStopped += 1;
    lines.push(`healthy jobs stopped by the faults: ${healthyStopped} of ${E2E_JOBS - 2 * CANCELS}`);
    const profiler = Promise.all([profileFrom(PROFILE_FILE), sampleStatementsInto(admin, SQL_SAMPLE_FILE)]);
    if (HOST_PROFILE_FILE !== undefined) writeFileSync(profileMarkOf(scratch), '');
    const functionsBefore = SQL_SAMPLE_FILE === undefined ? null : await functionStats(admin);
    const cpuBefore = cpuAccountNow(workers, subtree);
    const projectStart = performance.now();
    const projectSent = Date.now();
    projectSentMs = projectSent;
    // Caught here: a failure of the measurement is reported on its line, and the run still cleans up.
    const gone = treesGone(subtree, projectStart, PROJECT_TARGET_S, 300).catch((error: unknown) => ({
      goneS: null,
      leftAtCheck: -1,
      error: String(error),
    }));
    await operator.send('POST', '/v1/projects/fleet/cancel', undefined, OPERATOR_TIMEOUT_MS);
    const recorded = (performance.now() - projectStart) / 1000;
    const left = (): Promise<number> => fleetRunsIn(owner, ['queued', 'running']);
    while ((await left()) > 0 && performance.now() - projectStart < 120_000)
      await new Promise((r) => setTimeout(r, 100));
    lines.push(
      `project-wide cancel of the other ${E2E_JOBS - 2 * CANCELS} runs: every run ended (its job gone, reported) in ${((performance.now() - projectStart) / 1000).toFixed(1)} s (the cancel request itself ${recorded.toFixed(1)} s); ${await left()} left`,
      termAfter(marker, 2 * CANCELS, E2E_JOBS, projectSent),
    );
    const trees = await gone;
    lines.push(cpuAccountLine(cpuBefore, cpuAccountNow(workers, subtree), (performance.now() - projectStart) / 1000));
    await profiler;
    if (SQL_SAMPLE_FILE !== undefined && functionsBefore !== null) {
      await new Promise((r) => setTimeout(r, 1_500)); // each backend reports its counts within a second
      appendFunctionStats(SQL_SAMPLE_FILE, functionsBefore, await functionStats(admin));
    }
    lines.push(
      `project-wide cancel → every job's process tree gone (the jobs' cgroup subtree empty): ${trees.goneS === null ? ('error' in trees ? `not measured (${trees.error})` : 'not within 300 s') : `${trees.goneS.toFixed(1)} s`} after the request was sent; trees left ${PROJECT_TARGET_S} s after it: ${trees.leftAtCheck} of ${E2E_JOBS - 2 * CANCELS}`,
    );
  } finally {
    operator.close();
    for (const worker of workers)
      if (worker.identity !== null) signalVerified(worker.identity, 'SIGTERM', { group: false });
    await Promise.all(workers.map((worker) => worker.exit));
    lines.push(...workerTimeline(scratch, projectSentMs));
    for (const plane of planes) await plane.close();
    if (killable.leader.identity !== null) signalVerified(killable.leader.identity, 'SIGKILL', { group: false });
    await killable.leader.exit;
    await silent.close();
    await removeJobSubtree(subtree);
    await owner.end();
    certs.remove();
    rmSync(scratch, { recursive: true, force: true });
  }
  return lines;
}

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    console.log('## Fleet');
    console.log('');
    console.log(machineHeader([`command: npm run bench:fleet`]));
    console.log('');
    console.log(
      `## 1. One tick of every worker (${PER_WORKER} leases per worker), database cost; baseline: main's per-job tick`,
    );
    console.log('');
    const rows = SKIP_CURVE ? [] : await curve(db.runtimeUrl);
    if (!SKIP_CURVE)
      console.log(
        renderGrid(
          [
            'jobs',
            'workers',
            'path',
            'round trips / job / s (1 s tick)',
            'round trips / tick',
            'commits / tick',
            'tick ms',
            'ms / job',
          ],
          rows,
          [true, true, false, true, true, true, true, true],
        ),
      );
    console.log('');
    console.log(
      `## 2. End to end: ${E2E_JOBS} jobs (real processes, production launcher), ${E2E_WORKERS} workers (${PER_PROCESS === 1 ? 'one `pidfence worker` process each' : `${PER_PROCESS} per process`}, jobs at --job-nice ${JOB_NICE}), 3 replicas`,
    );
    console.log('');
    for (const line of await endToEnd(db.runtimeUrl, db.ownerUrl, db.admin)) console.log(`- ${line}`);
  });
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
