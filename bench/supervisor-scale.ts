// Supervisor cycle time with 10 due runs among 1k / 100k / 1M non-due dispatch rows (SQLite), then
// with 1k / 10k / 100k not-due cancelled runs on top of those 1M history rows (issue 19 (c),
// docs/decisions/0022), and the idle edge runner's RSS and wake-ups per minute (design/dispatch §2.6).
// Run: npm run build && nice -n 10 node dist/bench/supervisor-scale.js
// Env: PIDFENCE_BENCH_SCALES (default 1000,100000,1000000), PIDFENCE_BENCH_SAMPLES (15),
//      PIDFENCE_BENCH_IDLE_SECONDS (60), PIDFENCE_BENCH_BACKLOG (1000,10000,100000).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  ControllerRegistry,
  Dispatcher,
  LifecycleRunner,
  Supervisor,
  profile,
  type TerminationController,
} from '../lib/dispatch/index';
import type { TerminationOutcome } from '../lib/process/index';
import { openSqliteStore, type SqliteStore } from '../lib/store/sqlite/index';
import { machineHeader } from './lib/machine';
import { summarize } from './lib/stats';
import { renderTable, renderTargets, type Row, type Target } from './lib/table';
import { driverOf } from '../lib/store/sqlite/driver';

const SCALES = (process.env.PIDFENCE_BENCH_SCALES ?? '1000,100000,1000000').split(',').map(Number);
const BACKLOG = (process.env.PIDFENCE_BENCH_BACKLOG ?? '1000,10000,100000').split(',').map(Number);
const SAMPLES = Number(process.env.PIDFENCE_BENCH_SAMPLES ?? 15);
const IDLE_SECONDS = Number(process.env.PIDFENCE_BENCH_IDLE_SECONDS ?? 60);
const DUE_PER_SAMPLE = 10;
/** Untimed samples first at every scale: JIT warm-up and a warm page cache for the new rows. */
const WARMUP_SAMPLES = 3;
const HANDLE = '{"platform":"linux"}';
const BASE_MS = 1_700_000_000_000;

/** Answers already_exited at once: the cycle's cost is the store's, not a process's. */
class ExitedController implements TerminationController {
  readonly platform = 'linux';
  boundMs(graceMs: number): number {
    return graceMs + 100;
  }
  async requestTermination(): Promise<TerminationOutcome> {
    return { result: 'already_exited', escalated: false, exitObserved: true };
  }
}

function tempFile(): { file: string; cleanup(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-scale-'));
  return { file: path.join(dir, 'bench.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

type RowKind = 'history' | 'backlog';

/**
 * Bulk-inserts non-due rows [from, to) in one transaction with prepared statements.
 * history: finished runs (terminal) with a dispatched record, 1 in 10 a retry_wait far in the future.
 * backlog: still-active cancelled runs whose record is not due, in four kinds by turn: retry_wait
 * far in the future, a live lease expiring far in the future, blocked, dispatched (not yet converged).
 */
function insertNonDue(store: SqliteStore, from: number, to: number, kind: RowKind): void {
  const db = store.database;
  const run = driverOf(db)
    .prepare(`INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    VALUES (?, 'p', 'runtime', ?, 2, ?, 'user', 3, ?, ?)`);
  const attempt = driverOf(db)
    .prepare(`INSERT INTO attempts (run_id, id, status, pid, handle, deadline_at_ms, receipt_token_digest, created_at_ms, updated_at_ms)
    VALUES (?, ?, ?, NULL, NULL, NULL, NULL, ?, ?)`);
  const dispatch = driverOf(db)
    .prepare(`INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms,
      lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (?, 'p', ?, ?, 2, 1, ?, NULL, NULL, NULL, ?, ?, NULL, ?, ?)`);
  const leased = driverOf(db)
    .prepare(`INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms,
      lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (?, 'p', ?, 'leased', 1, 1, NULL, 'other', '${'a'.repeat(64)}', ?, NULL, ?, NULL, ?, ?)`);
  const blocked = driverOf(db)
    .prepare(`INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms,
      lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (?, 'p', ?, 'blocked', 2, 1, NULL, NULL, NULL, NULL, 'pid_mismatch', ?, ?, ?, ?)`);
  const future = BASE_MS + 10 * 365 * 86_400_000;
  driverOf(db)
    .transaction(() => {
      for (let i = from; i < to; i += 1) {
        const id = `${kind}-${String(i).padStart(8, '0')}`;
        const at = BASE_MS - 86_400_000 + (i % 86_400_000);
        run.run(id, kind === 'history' ? 'cancelled' : 'running', at, at, at);
        attempt.run(id, `${id}-a1`, kind === 'history' ? 'cancelled' : 'running', at, at);
        const turn = kind === 'history' ? (i % 10 === 0 ? 0 : 3) : i % 4;
        if (turn === 1) leased.run(id, `${id}-a1`, future, at, at, at);
        else if (turn === 2) blocked.run(id, `${id}-a1`, at, at, at, at);
        else
          dispatch.run(
            id,
            `${id}-a1`,
            turn === 0 ? 'retry_wait' : 'dispatched',
            turn === 0 ? future : null,
            turn === 0 ? 'dispatch_error' : 'termination_requested',
            at,
            at,
            at,
          );
      }
    })
    .immediate();
}

let dueSequence = 0;
async function addDueRuns(store: SqliteStore): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < DUE_PER_SAMPLE; i += 1) {
    const runId = `due-${String((dueSequence += 1)).padStart(8, '0')}`;
    await store.runStore.createRun({ runId, projectId: 'p' });
    await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
    await store.runStore.advanceAttempt({
      runId,
      attemptId: `${runId}-a1`,
      from: 'claimed',
      to: 'running',
      pid: 4242,
      handle: HANDLE,
    });
    await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `${runId}-e1` });
    ids.push(runId);
  }
  return ids;
}

function supervisorFor(store: SqliteStore): Supervisor {
  const dispatcher = new Dispatcher({
    repository: store.dispatchRepository,
    runStore: store.runStore,
    controllers: new ControllerRegistry([new ExitedController()]),
    owner: 'bench',
    graceMs: 0,
    leaseDurationMs: 60_000,
  });
  const standalone = profile('standalone');
  return new Supervisor({
    repository: store.dispatchRepository,
    dispatcher,
    pageSize: standalone.pageSize,
    pagesPerCycle: standalone.pagesPerCycle,
  });
}

/** Cycle with 10 due runs (timed), then the runs are finished (untimed) so they leave every index. */
async function measureScale(store: SqliteStore, label: string): Promise<Row[]> {
  const supervisor = supervisorFor(store);
  const busy: number[] = [];
  const idle: number[] = [];
  for (let s = -WARMUP_SAMPLES; s < SAMPLES; s += 1) {
    const ids = await addDueRuns(store);
    const t0 = process.hrtime.bigint();
    const report = await supervisor.runCycle();
    if (s >= 0) busy.push(Number(process.hrtime.bigint() - t0));
    if (report.dispatched !== DUE_PER_SAMPLE) throw new Error(`bench: cycle dispatched ${report.dispatched}`);
    for (const runId of ids)
      await store.runStore.markTerminal({
        runId,
        status: 'cancelled',
        eventId: `${runId}-e9`,
        attemptId: `${runId}-a1`,
      });
    const t1 = process.hrtime.bigint();
    const empty = await supervisor.runCycle();
    if (s >= 0) idle.push(Number(process.hrtime.bigint() - t1));
    if (empty.items !== 0) throw new Error('bench: idle cycle found items');
  }
  const b = summarize(busy);
  const i = summarize(idle);
  return [
    { name: `${label}: cycle, 10 due`, median: b.median, p99: b.p99, samples: b.count },
    { name: `${label}: idle cycle`, median: i.median, p99: i.p99, samples: i.count },
  ];
}

/** One series on `store`: rows of `kind` grow to each scale; every step's rows compare with the first step's. */
async function scaleSeries(store: SqliteStore, kind: RowKind, scales: readonly number[], prefix = ''): Promise<Row[]> {
  const rows: Row[] = [];
  let have = 0;
  for (const scale of scales) {
    const t0 = Date.now();
    insertNonDue(store, have, scale, kind);
    have = scale;
    driverOf(store.database).pragma('wal_checkpoint(TRUNCATE)');
    driverOf(store.database).exec('ANALYZE');
    process.stderr.write(`${kind} ${scale}: inserted in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    const label = `${prefix}${kind} ${scale.toLocaleString('en-US')}`;
    const base = rows[0]?.name;
    const measured = await measureScale(store, label);
    rows.push(
      ...measured.map((row, index) => (base === undefined ? row : { ...row, baseline: rows[index]?.name ?? base })),
    );
  }
  return rows;
}

/** Child mode: an idle edge runner on a small store; prints wakes and RSS after IDLE_SECONDS. */
async function idleChild(file: string, seconds: number): Promise<void> {
  const store = openSqliteStore(file);
  await addDueRuns(store); // something exists; after the first cycle nothing is due
  const edge = profile('edge');
  const dispatcher = new Dispatcher({
    repository: store.dispatchRepository,
    runStore: store.runStore,
    controllers: new ControllerRegistry([new ExitedController()]),
    graceMs: 0,
    leaseDurationMs: 60_000,
  });
  const supervisor = new Supervisor({
    repository: store.dispatchRepository,
    dispatcher,
    pageSize: edge.pageSize,
    pagesPerCycle: edge.pagesPerCycle,
  });
  let wakes = 0;
  const runner = new LifecycleRunner({
    supervisor: {
      runCycle: () => {
        wakes += 1;
        return supervisor.runCycle();
      },
    },
    cadenceMs: edge.periodMs,
    stopTimeoutMs: edge.stopTimeoutMs,
  });
  runner.start();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const wakesAfterWarmup = wakes;
  const cpu0 = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  const result = {
    wakes: wakes - wakesAfterWarmup,
    seconds,
    rss: process.memoryUsage().rss,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
  await runner.stop();
  store.close();
  process.stdout.write(JSON.stringify(result));
}

function bareNodeRss(): number {
  return Number(
    execFileSync(
      process.execPath,
      ['-e', 'setTimeout(() => process.stdout.write(String(process.memoryUsage().rss)), 500)'],
      { encoding: 'utf8' },
    ),
  );
}

/** Largest scale vs smallest, for the busy and the idle cycle rows of one series. */
function ratioTargets(series: readonly Row[], detail: string): Target[] {
  const targets: Target[] = [];
  for (const offset of [0, 1]) {
    const first = series[offset];
    const last = series[series.length - 2 + offset];
    if (first === undefined || last === undefined || first === last) continue;
    targets.push({
      name: `${last.name} vs ${first.name.split(':')[0]}`,
      ratio: last.median / first.median,
      op: '<=',
      limit: 1.5,
      detail,
    });
  }
  return targets;
}

async function main(): Promise<void> {
  if (process.argv[2] === '--idle-child') return idleChild(process.argv[3] ?? '', Number(process.argv[4]));
  console.log('# supervisor scale (SQLite)');
  console.log('');
  console.log(
    machineHeader([
      `method: standalone profile (32 × 4), ${SAMPLES} samples per scale after ${WARMUP_SAMPLES} untimed ones; a sample = one cycle dispatching ${DUE_PER_SAMPLE} first-claim runs (claim + controller answering already_exited + settle), then one idle cycle; non-due rows bulk-inserted in one transaction per step, then ANALYZE`,
      `history rows: finished runs with a dispatched record (1 in 10 retry_wait due in 10 years); backlog rows, added on top of the largest history: still-active cancelled runs, by turns retry_wait due in 10 years, a live lease expiring in 10 years, blocked, dispatched`,
    ]),
  );
  console.log('');

  const { file, cleanup } = tempFile();
  const idle = (() => {
    try {
      return JSON.parse(
        execFileSync(process.execPath, [__filename, '--idle-child', file, String(IDLE_SECONDS)], { encoding: 'utf8' }),
      ) as { wakes: number; seconds: number; rss: number; cpuMs: number };
    } finally {
      cleanup();
    }
  })();
  const bare = bareNodeRss();

  const series = tempFile();
  const store = openSqliteStore(series.file);
  let history: Row[];
  let backlog: Row[];
  try {
    history = await scaleSeries(store, 'history', SCALES);
    const last = SCALES[SCALES.length - 1] ?? 0;
    backlog = await scaleSeries(store, 'backlog', BACKLOG, `${last.toLocaleString('en-US')} history + `);
  } finally {
    store.close();
    series.cleanup();
  }
  console.log(renderTable([...history, ...backlog]));
  console.log('');
  const targets = [
    ...ratioTargets(history, 'the due query is index-bound, not table-bound'),
    ...ratioTargets(backlog, 'not-due cancelled runs stay out of the due ranges (docs/decisions/0022)'),
  ];
  console.log(renderTargets(targets));
  console.log('');
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  console.log(`| idle edge runner (${profile('edge').periodMs} ms cadence, ${idle.seconds} s) | value |`);
  console.log('| --- | ---: |');
  console.log(`| wake-ups per minute | ${((idle.wakes * 60) / idle.seconds).toFixed(1)} |`);
  console.log(`| RSS with store + runner | ${mb(idle.rss)} |`);
  console.log(`| RSS of a bare node process | ${mb(bare)} |`);
  console.log(`| CPU time while idle | ${idle.cpuMs.toFixed(0)} ms over ${idle.seconds} s |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
