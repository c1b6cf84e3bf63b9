// Edge footprint (issue 19 §4; docs/decisions/0105). Not a test.
// 1. The modules each edge/standalone entry loads, in a fresh process.
// 2. Idle RSS and wake-ups per minute of an edge `pidfence supervise` holding 1,000 idle runs (and
//    holding none), against a bare `node -e` holding a better-sqlite3 database (WAL), all idle over
//    the same window. Wake-ups: voluntary context switches of every thread of the process.
// 3. WAL bytes per cancellation end to end: `pidfence run` → `pidfence cancel` → stopped → terminal,
//    with a reader holding the WAL open so that no checkpoint can reuse it during the count.
// 4. Installed size: the packed tarball installed into a new project with its production dependencies.
// Run: npm run bench:edge (PIDFENCE_BENCH_IDLE_MS, default 60000; PIDFENCE_BENCH_WAL_RUNS, default 10)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import Database from 'better-sqlite3';

import { osPrincipal } from '../lib/cli/os-user';
import { signalVerified, type ProcessIdentity } from '../lib/native/index';
import { spawnGroupLeader, type SpawnedJob } from '../lib/process/index';
import { openSqliteStore } from '../lib/store/sqlite/index';
import { installPacked, packInto } from '../test/helpers/packed-install';
import { machineHeader } from './lib/machine';

const root = path.resolve(__dirname, '..', '..');
const CLI = path.join(root, 'dist', 'lib', 'cli', 'main.js');
const IDLE_MS = Number(process.env.PIDFENCE_BENCH_IDLE_MS ?? 60_000);
const WAL_RUNS = Number(process.env.PIDFENCE_BENCH_WAL_RUNS ?? 10);
const HELD_RUNS = 1_000;
const RSS_TARGET = 1.2;
/** After the seeding, before the window: the supervise's first cycles and a GC have passed. */
const SETTLE_MS = 10_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function until(probe: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`bench: ${what} did not happen within ${timeoutMs} ms`);
    await sleep(20);
  }
}

function modulesLoaded(entry: string): { files: number; packages: string[] } {
  const script = `require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`;
  const result = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) throw new Error(`node -e failed: ${result.stderr}`);
  const files = JSON.parse(result.stdout) as string[];
  const packages = new Set(files.map((file) => /node_modules\/((@[^/]+\/)?[^/]+)/.exec(file)?.[1]).filter((name): name is string => name !== undefined));
  return { files: files.length, packages: [...packages].sort() };
}

/** RSS (kB) and voluntary context switches summed over the threads, from /proc (a read, no signal). */
function processCounters(pid: number): { rssKb: number; wakeups: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
  let wakeups = 0;
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      wakeups += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return { rssKb, wakeups };
}

interface Idler {
  readonly name: string;
  readonly job: SpawnedJob;
}

function idler(name: string, args: readonly string[]): Idler {
  const job = spawnGroupLeader(process.execPath, args, { cwd: root, stdio: 'ignore' });
  if (job.identity === null) throw new Error(`bench: ${name} did not start`);
  return { name, job };
}

/** Verified SIGKILL of a group this benchmark started. */
async function killGroup(identity: ProcessIdentity | null, exit: Promise<unknown>): Promise<void> {
  if (identity === null) return;
  if (signalVerified(identity, 'SIGKILL', { group: true }).kind === 'signalled') await exit;
}

/**
 * `count` running attempts of the supervise's own runner, written as its admission would write them
 * (claimed → starting → running with pid and durable handle). Each is a real idle process group
 * (`sleep`); the pidfence launcher is left out because it costs a Node process per job
 * (docs/decisions/0050), and adoption is left out because the edge profile adopts 64 attempts per
 * 5-minute cleanup period.
 */
async function seedHeldRuns(file: string, runnerId: string, count: number, jobs: SpawnedJob[]): Promise<void> {
  const store = openSqliteStore(file);
  try {
    for (let i = 0; i < count; i++) {
      const job = spawnGroupLeader('sleep', ['3600'], { stdio: 'ignore' });
      if (job.handle === null || job.child.pid === undefined) throw new Error('bench: sleep did not start');
      jobs.push(job);
      const runId = `idle-${i}`;
      const attemptId = `${runId}-a1`;
      await store.runStore.createRun({ runId, projectId: 'edge' });
      await store.runStore.createAttempt({ runId, attemptId, runnerId });
      await store.runStore.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'starting' });
      await store.runStore.advanceAttempt({ runId, attemptId, from: 'starting', to: 'running', pid: job.child.pid, handle: job.handle });
    }
  } finally {
    store.close();
  }
}

/** The first row of a read on its own short connection (the writers are other processes). */
function readRow<T>(file: string, sql: string): T | undefined {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(sql).get() as T | undefined;
  } finally {
    db.close();
  }
}

function count(file: string, sql: string): number {
  return readRow<{ n: number }>(file, sql)?.n ?? 0;
}

interface IdleRow {
  readonly name: string;
  readonly rssKb: number;
  readonly wakeupsPerMinute: number;
}

async function idleRows(dir: string): Promise<IdleRow[]> {
  const bareFile = path.join(dir, 'bare.db');
  const emptyFile = path.join(dir, 'empty.db');
  const heldFile = path.join(dir, 'held.db');
  openSqliteStore(emptyFile).close();
  openSqliteStore(heldFile).close();
  const supervise = (file: string): string[] => [CLI, 'supervise', '--db', file, '--profile', 'edge'];
  const idlers = [
    idler('bare `node -e`: better-sqlite3 database open (WAL)', ['-e', `const db = new (require('better-sqlite3'))(${JSON.stringify(bareFile)}); db.pragma('journal_mode = WAL'); setInterval(() => {}, 2 ** 30);`]),
    idler('pidfence/sqlite store open + pidfence/dispatch loaded (no supervise, no runs)', ['-e', `require('pidfence/dispatch'); require('pidfence/sqlite').openSqliteStore(${JSON.stringify(path.join(dir, 'store.db'))}); setInterval(() => {}, 2 ** 30);`]),
    idler('`pidfence supervise --profile edge`, no runs', supervise(emptyFile)),
    idler(`\`pidfence supervise --profile edge\` holding ${HELD_RUNS} idle runs`, supervise(heldFile)),
  ];
  const held: SpawnedJob[] = [];
  try {
    const ownRunner = "SELECT id FROM runners WHERE kind = 'supervise' AND ended_at_ms IS NULL";
    await until(() => readRow(heldFile, ownRunner) !== undefined, 'the supervise to register');
    const runnerId = (readRow<{ id: string }>(heldFile, ownRunner) as { id: string }).id;
    await seedHeldRuns(heldFile, runnerId, HELD_RUNS, held);
    await sleep(SETTLE_MS);
    const before = idlers.map((one) => processCounters(one.job.child.pid as number));
    await sleep(IDLE_MS);
    const after = idlers.map((one) => processCounters(one.job.child.pid as number));
    if (count(heldFile, "SELECT count(*) AS n FROM attempts WHERE status = 'running'") !== HELD_RUNS) throw new Error('bench: the held runs did not stay running');
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

function walBytes(file: string): number {
  try {
    return fs.statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/** Lines of a child's stderr, collected. */
function stderrOf(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; });
  return () => text;
}

interface WalCost {
  readonly start: number;
  readonly cancellation: number;
  readonly pageSize: number;
}

/** Mean WAL bytes of a run's start and of its cancellation, over WAL_RUNS runs of the real commands. */
async function walPerCancellation(dir: string): Promise<WalCost> {
  const file = path.join(dir, 'wal.db');
  const store = openSqliteStore(file);
  for (const permission of ['run.read', 'run.stop'] as const) await store.managementStore.writeGrant({ subject: osPrincipal(), projectId: 'edge', permission }, 'bench');
  store.close();
  // An open read transaction pins the WAL: checkpoints may copy frames back, never restart the file.
  const pin = new Database(file, { readonly: true });
  pin.exec('BEGIN');
  pin.prepare('SELECT count(*) AS n FROM runs').get();
  const pageSize = pin.pragma('page_size', { simple: true }) as number;
  let start = 0;
  let cancellation = 0;
  try {
    for (let i = 0; i < WAL_RUNS; i++) {
      const marker = path.join(dir, `wal-${i}`);
      const before = walBytes(file);
      const runner = spawn(process.execPath, [CLI, 'run', '--db', file, '--project', 'edge', '--', 'sh', '-c',
        `trap 'exit 143' TERM; echo up > ${marker}; while :; do sleep 0.05; done`], { stdio: ['ignore', 'ignore', 'pipe'] });
      const said = stderrOf(runner);
      const ended = once(runner, 'exit');
      await until(() => /run (\S+) started/.test(said()) && fs.existsSync(marker), 'the run to start');
      const runId = /run (\S+) started/.exec(said())?.[1] as string;
      await until(() => count(file, `SELECT count(*) AS n FROM attempts WHERE run_id = '${runId}' AND status = 'running'`) === 1, 'the attempt to be running');
      const started = walBytes(file);
      const cancel = spawn(process.execPath, [CLI, 'cancel', runId, '--db', file], { stdio: 'ignore' });
      await once(cancel, 'exit');
      await ended;
      if (count(file, `SELECT count(*) AS n FROM runs WHERE id = '${runId}' AND status = 'cancelled'`) !== 1) throw new Error('bench: the run did not end cancelled');
      start += started - before;
      cancellation += walBytes(file) - started;
    }
  } finally {
    pin.exec('COMMIT');
    pin.close();
  }
  return { start: start / WAL_RUNS, cancellation: cancellation / WAL_RUNS, pageSize };
}

function duKb(target: string): number {
  return Number(spawnSync('du', ['-sk', target], { encoding: 'utf8' }).stdout.split('\t')[0]);
}

/** The tarball installed into a new project: every package under its node_modules, largest first. */
function installedSize(dir: string): { totalKb: number; packages: Array<{ name: string; kb: number }> } {
  const packed = packInto(dir);
  const modules = installPacked(path.join(dir, packed.filename), path.join(dir, 'consumer'));
  const names = fs.readdirSync(modules).filter((name) => !name.startsWith('.')).flatMap((name) =>
    name.startsWith('@') ? fs.readdirSync(path.join(modules, name)).map((inner) => `${name}/${inner}`) : [name]);
  const packages = names.map((name) => ({ name, kb: duKb(path.join(modules, name)) })).sort((a, b) => b.kb - a.kb);
  return { totalKb: duKb(modules), packages };
}

const mb = (kb: number): string => `${(kb / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  const lines: string[] = ['## Edge footprint', '', machineHeader([
    `idle window ${IDLE_MS / 1000} s after ${SETTLE_MS / 1000} s of settling, the four processes side by side; WAL: ${WAL_RUNS} runs`,
  ]), ''];
  lines.push('| entry | modules loaded | packages from node_modules |', '| --- | ---: | --- |');
  for (const entry of ['pidfence', 'pidfence/native', 'pidfence/process', 'pidfence/contract', 'pidfence/sqlite', 'pidfence/dispatch', 'pidfence/execution']) {
    const loaded = modulesLoaded(entry);
    lines.push(`| \`${entry}\` | ${loaded.files} | ${loaded.packages.join(', ') || '—'} |`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-edge-'));
  try {
    const rows = await idleRows(dir);
    const bare = rows[0] as IdleRow;
    lines.push('', '| process, idle | RSS | RSS vs bare | wake-ups per minute |', '| --- | ---: | ---: | ---: |');
    for (const row of rows) lines.push(`| ${row.name} | ${row.rssKb} kB | ${(row.rssKb / bare.rssKb).toFixed(2)}x | ${row.wakeupsPerMinute.toFixed(0)} |`);
    const heldRatio = (rows[3]?.rssKb ?? Number.NaN) / bare.rssKb;
    lines.push('', `- ${heldRatio <= RSS_TARGET ? 'PASS' : 'MISS'} idle RSS of an edge supervise holding ${HELD_RUNS} runs vs bare node + better-sqlite3: ${heldRatio.toFixed(2)}x (target <= ${RSS_TARGET}x)`);

    const wal = await walPerCancellation(dir);
    const frame = wal.pageSize + 24;
    lines.push('', `| WAL bytes per run, \`pidfence run\` + \`pidfence cancel\` (page ${wal.pageSize} B, frame ${frame} B) | bytes | frames |`, '| --- | ---: | ---: |');
    lines.push(`| run start: runner registered, run admitted, job running | ${wal.start.toFixed(0)} | ${(wal.start / frame).toFixed(1)} |`);
    lines.push(`| cancellation: intent → dispatch claim and result → stopped → terminal, runner ended | ${wal.cancellation.toFixed(0)} | ${(wal.cancellation / frame).toFixed(1)} |`);
    lines.push(`| whole run | ${(wal.start + wal.cancellation).toFixed(0)} | ${((wal.start + wal.cancellation) / frame).toFixed(1)} |`);

    const installed = installedSize(dir);
    const shown = installed.packages.slice(0, 6).map((pkg) => `${pkg.name} ${mb(pkg.kb)}`).join(', ');
    lines.push('', `Installed size (\`npm pack\`, then \`npm install\` of the tarball into a new project, production dependencies only, better-sqlite3 with its one prebuilt binary): ${mb(installed.totalKb)} in ${installed.packages.length} packages; largest: ${shown}.`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exitCode = 1;
});
