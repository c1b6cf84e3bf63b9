// Claim + settle cycles per second through SqliteDispatchRepository vs a hand-written minimal
// better-sqlite3 cycle in the same run, and WAL bytes per cycle (design/dispatch §5 edge gap; design/architecture §12);
// then PostgresDispatchRepository vs a hand-written pg cycle and pg-boss 10.4.2 (design/postgres).
// Run: npm run bench:dispatch   (nice it on a shared machine; PIDFENCE_BENCH_STORES=sqlite|postgres picks one)
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

import { createLeaseToken } from '../lib/contract/index';
import { openSqliteStore, type SqliteSynchronous } from '../lib/store/sqlite/index';
import { PG_SIDES, serverVersion, withBenchDatabase, type PgSide } from './lib/dispatch-postgres';
import { driverOf } from '../lib/store/sqlite/driver';

const CYCLES = Number(process.env.PIDFENCE_BENCH_CYCLES ?? 2_000);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_ROUNDS ?? 3);
/** FACTS.md: hand-written cycle, 5 page frames. */
const BASELINE_WAL_BYTES = 21_167;
const DOMAIN = 'pidfence.cancellation-dispatch-lease.v1\0';

interface Measurement {
  readonly cyclesPerSecond: number;
  readonly walBytesPerCycle: number;
  /** Process CPU time (user + system) per cycle: less sensitive than wall time to other work on the machine. */
  readonly cpuMicrosPerCycle: number;
}

function cpuMicrosSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / CYCLES;
}

function walBytes(file: string): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

function tempFile(): { file: string; cleanup(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-'));
  return { file: path.join(dir, 'bench.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts the timed part from an empty WAL with checkpoints off, so WAL growth is the cycles' own. */
function resetWal(database: Database.Database, synchronous: SqliteSynchronous): void {
  database.pragma('wal_checkpoint(TRUNCATE)');
  database.pragma('wal_autocheckpoint = 0');
  database.pragma(`synchronous = ${synchronous}`);
}

async function measureRepository(synchronous: SqliteSynchronous): Promise<Measurement> {
  const { file, cleanup } = tempFile();
  const store = openSqliteStore(file, { synchronous: 'NORMAL' });
  try {
    const runs: Array<{ runId: string; attemptId: string; cancelRequestedAtMs: number }> = [];
    for (let i = 0; i < CYCLES; i += 1) {
      const runId = `run-${String(i).padStart(6, '0')}`;
      await store.runStore.createRun({ runId, projectId: 'project-a' });
      await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
      const cancelled = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `${runId}-e1` });
      runs.push({
        runId,
        attemptId: `${runId}-a1`,
        cancelRequestedAtMs: cancelled.kind === 'requested' ? (cancelled.run.cancelRequestedAtMs ?? 0) : 0,
      });
    }
    resetWal(driverOf(store.database), synchronous);
    const cpu = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (const run of runs) {
      const token = createLeaseToken();
      const claim = await store.dispatchRepository.claim({
        ...run,
        owner: 'bench-worker',
        token,
        leaseDurationMs: 60_000,
      });
      if (claim.kind !== 'claimed') throw new Error(`bench: claim was ${claim.kind}`);
      const settled = await store.dispatchRepository.recordResult({
        runId: run.runId,
        attemptId: run.attemptId,
        owner: 'bench-worker',
        token,
        expectedVersion: claim.record.version,
        result: 'termination_requested',
        eventId: `${run.runId}-e2`,
      });
      if (settled.kind !== 'recorded') throw new Error('bench: settle failed');
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    return {
      cyclesPerSecond: CYCLES / seconds,
      walBytesPerCycle: walBytes(file) / CYCLES,
      cpuMicrosPerCycle: cpuMicrosSince(cpu),
    };
  } finally {
    store.close();
    cleanup();
  }
}

/** The FACTS.md baseline shape: rowid tables, an event id index, the same fences, no library. */
const MINIMAL_SCHEMA = `
CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL,
  cancel_requested_at_ms INTEGER, next_event_seq INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL);
CREATE TABLE attempts (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE dispatches (run_id TEXT PRIMARY KEY, attempt_id TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL,
  dispatch_count INTEGER NOT NULL, next_attempt_at_ms INTEGER, lease_owner TEXT, lease_token_digest TEXT,
  lease_expires_at_ms INTEGER, last_result TEXT, updated_at_ms INTEGER NOT NULL);
CREATE TABLE events (id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
  payload TEXT NOT NULL, created_at_ms INTEGER NOT NULL);`;

function measureHandWritten(synchronous: SqliteSynchronous): Measurement {
  const { file, cleanup } = tempFile();
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(MINIMAL_SCHEMA);
    const now = Date.now();
    db.transaction(() => {
      const run = db.prepare("INSERT INTO runs VALUES (?, 'runtime', 'running', 1, ?, 2, ?)");
      const attempt = db.prepare("INSERT INTO attempts VALUES (?, ?, 'running')");
      for (let i = 0; i < CYCLES; i += 1) {
        run.run(`run-${String(i).padStart(6, '0')}`, now, now);
        attempt.run(`run-${String(i).padStart(6, '0')}-a1`, `run-${String(i).padStart(6, '0')}`);
      }
    })();
    const selectRun = db.prepare('SELECT owner, status, version, cancel_requested_at_ms FROM runs WHERE id = ?');
    const selectAttempt = db.prepare('SELECT status FROM attempts WHERE id = ? AND run_id = ?');
    const selectDispatch = db.prepare('SELECT version FROM dispatches WHERE run_id = ?');
    const insertLeased = db.prepare("INSERT INTO dispatches VALUES (?, ?, 'leased', 1, 1, NULL, ?, ?, ?, NULL, ?)");
    const settle = db.prepare(`UPDATE dispatches SET status = 'dispatched', version = version + 1, last_result = ?,
      lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL, updated_at_ms = ?
      WHERE run_id = ? AND attempt_id = ? AND lease_owner = ? AND lease_token_digest = ? AND version = ? RETURNING dispatch_count`);
    const reserve = db.prepare(
      'UPDATE runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = ? WHERE id = ? AND version = ? RETURNING next_event_seq - 1 AS seq',
    );
    const insertEvent = db.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)');
    const digest = (token: string) => createHash('sha256').update(DOMAIN).update(token).digest('hex');
    const claim = db.transaction((runId: string, attemptId: string, token: string) => {
      const t = Date.now();
      const run = selectRun.get(runId) as { version: number; cancel_requested_at_ms: number };
      selectAttempt.get(attemptId, runId);
      if (selectDispatch.get(runId) !== undefined) throw new Error('bench: exists');
      insertLeased.run(runId, attemptId, 'bench-worker', digest(token), t + 60_000, t);
      return run.version;
    });
    const result = db.transaction((runId: string, attemptId: string, token: string) => {
      const t = Date.now();
      const row = settle.get('termination_requested', t, runId, attemptId, 'bench-worker', digest(token), 1) as {
        dispatch_count: number;
      };
      const run = selectRun.get(runId) as { version: number };
      const seq = (reserve.get(t, runId, run.version) as { seq: number }).seq;
      insertEvent.run(
        `${runId}-e2`,
        runId,
        seq,
        'run.cancel_dispatched',
        JSON.stringify({ attemptId, dispatchCount: row.dispatch_count, result: 'termination_requested' }),
        t,
      );
    });
    resetWal(db, synchronous);
    const cpu = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (let i = 0; i < CYCLES; i += 1) {
      const runId = `run-${String(i).padStart(6, '0')}`;
      const token = randomBytes(32).toString('base64url');
      claim.immediate(runId, `${runId}-a1`, token);
      result.immediate(runId, `${runId}-a1`, token);
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    return {
      cyclesPerSecond: CYCLES / seconds,
      walBytesPerCycle: walBytes(file) / CYCLES,
      cpuMicrosPerCycle: cpuMicrosSince(cpu),
    };
  } finally {
    db.close();
    cleanup();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const fmt = (value: number, digits = 0) =>
  value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

const STORES = (process.env.PIDFENCE_BENCH_STORES ?? 'sqlite,postgres').split(',');
/** PIDFENCE_BENCH_SQLITE_SYNC=NORMAL runs only the NORMAL row (repeated runs on a shared machine). */
const SQLITE_MODES = (['NORMAL', 'FULL'] as const).filter((mode) =>
  (process.env.PIDFENCE_BENCH_SQLITE_SYNC ?? 'NORMAL,FULL').split(',').includes(mode),
);
const PG_CYCLES = Number(process.env.PIDFENCE_BENCH_PG_CYCLES ?? 600);
const PG_CLIENTS = [1, 4] as const;

async function mainPostgres(): Promise<void> {
  await withBenchDatabase(async (db) => {
    console.log('# dispatch throughput (PostgreSQL)');
    console.log(
      `machine: ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${os.platform()} ${os.release()}, Node ${process.version}, ${await serverVersion(db)}, pg-boss 10.4.2, loadavg ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    console.log(`date: ${new Date().toISOString()}`);
    console.log(
      `command: node ${process.argv
        .slice(1)
        .map((arg) => path.relative(process.cwd(), arg))
        .join(
          ' ',
        )} (cycles=${PG_CYCLES} per side and round, rounds=${ROUNDS}, median of rounds; PIDFENCE_BENCH_PG_CYCLES / _ROUNDS override)`,
    );
    console.log('');
    console.log(
      '| clients | repository cycles/s | hand-written cycles/s | pg-boss fetch+complete/s | repository / hand-written (target ≥ 1.0) | repository / pg-boss (target ≥ 1.2) |',
    );
    console.log('| ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const clients of PG_CLIENTS) {
      const rates: Record<PgSide, number[]> = { repository: [], 'hand-written': [], 'pg-boss': [] };
      for (let round = 0; round < ROUNDS; round += 1) {
        // Rotate the order so load from other work falls on every side alike.
        const order = (['hand-written', 'repository', 'pg-boss'] as const).map(
          (_, i, all) => all[(i + round) % all.length] as PgSide,
        );
        for (const side of order)
          rates[side].push(await PG_SIDES[side](db, clients, PG_CYCLES, `c${clients}r${round}`));
      }
      const [repo, hand, boss] = [median(rates.repository), median(rates['hand-written']), median(rates['pg-boss'])];
      console.log(
        `| ${clients} | ${fmt(repo)} | ${fmt(hand)} | ${fmt(boss)} | ${fmt(repo / hand, 2)} ${repo / hand >= 1 ? 'PASS' : 'MISS'} | ${fmt(repo / boss, 2)} ${repo / boss >= 1.2 ? 'PASS' : 'MISS'} |`,
      );
    }
  });
}

async function main(): Promise<void> {
  if (STORES.includes('sqlite')) await mainSqlite();
  if (STORES.includes('sqlite') && STORES.includes('postgres')) console.log('');
  if (STORES.includes('postgres')) await mainPostgres();
}

async function mainSqlite(): Promise<void> {
  const sqliteVersion = (new Database(':memory:').prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
  console.log('# dispatch throughput (SQLite)');
  console.log(
    `machine: ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${os.platform()} ${os.release()}, Node ${process.version}, SQLite ${sqliteVersion}, loadavg ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(`date: ${new Date().toISOString()}`);
  console.log(
    `command: node ${process.argv
      .slice(1)
      .map((arg) => path.relative(process.cwd(), arg))
      .join(
        ' ',
      )} (cycles=${CYCLES}, rounds=${ROUNDS}, median of rounds; PIDFENCE_BENCH_CYCLES / _ROUNDS / _SQLITE_SYNC override)`,
  );
  console.log('');
  console.log(
    '| synchronous | repository cycles/s | hand-written cycles/s | ratio, median of paired rounds (target ≥ 0.85 on NORMAL) | repository CPU µs/cycle | hand-written CPU µs/cycle | CPU ratio hand ÷ repository | repository WAL B/cycle | hand-written WAL B/cycle | repository vs baseline 21,167 B |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const synchronous of SQLITE_MODES) {
    const repository: Measurement[] = [];
    const hand: Measurement[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Alternate so that load from other work hits both sides alike.
      hand.push(measureHandWritten(synchronous));
      repository.push(await measureRepository(synchronous));
    }
    const repoRate = median(repository.map((m) => m.cyclesPerSecond));
    const handRate = median(hand.map((m) => m.cyclesPerSecond));
    // Each round's two sides ran back to back: the median of their ratios cancels load that drifts between rounds.
    const ratio = median(
      repository.map((m, round) => m.cyclesPerSecond / (hand[round]?.cyclesPerSecond ?? Number.NaN)),
    );
    const repoCpu = median(repository.map((m) => m.cpuMicrosPerCycle));
    const handCpu = median(hand.map((m) => m.cpuMicrosPerCycle));
    const repoWal = median(repository.map((m) => m.walBytesPerCycle));
    const handWal = median(hand.map((m) => m.walBytesPerCycle));
    console.log(
      `| ${synchronous} | ${fmt(repoRate)} | ${fmt(handRate)} | ${fmt(ratio, 2)}${synchronous === 'NORMAL' ? (ratio >= 0.85 ? ' PASS' : ' MISS') : ''} | ${fmt(repoCpu)} | ${fmt(handCpu)} | ${fmt(handCpu / repoCpu, 2)} | ${fmt(repoWal)} | ${fmt(handWal)} | ${fmt(repoWal / BASELINE_WAL_BYTES, 2)} |`,
    );
  }
  console.log(
    `loadavg after: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
