// Where the SQLite claim + settle cycle spends its statement time (issue 19 item 4): the CPU cost of
// each statement of the cycle on the store's schema next to the same step of the hand-written cycle
// of bench/dispatch-throughput.ts, all inside one open transaction (no commit, no fsync), then the
// price of one 3+ value IN list in a CHECK or partial-index predicate against the same rule spelt
// with OR. CPU time (process.cpuUsage), median of rounds: load from other work inflates both sides.
// Run: npm run build && node dist/bench/sqlite-statements.js
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

import { openSqliteStore } from '../lib/store/sqlite/index';
import { lazyPreparedSet, SQL } from '../lib/store/sqlite/prepared';
import { machineHeader } from './lib/machine';
import { driverOf } from '../lib/store/sqlite/driver';

const ROWS = Number(process.env.PIDFENCE_BENCH_ROWS ?? 3_000);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_ROUNDS ?? 5);
const DIGEST = 'ab'.repeat(32);
const NOW = 1_700_000_000_000;

type Steps = Record<string, (i: number) => unknown>;

interface World {
  readonly database: Database.Database;
  readonly steps: Steps;
  close(): void;
}

const runId = (i: number): string => `run-${i}`;
const attemptId = (i: number): string => `run-${i}-a1`;
const payload = (i: number): string =>
  JSON.stringify({ attemptId: attemptId(i), dispatchCount: 1, result: 'termination_requested' });

/** The store's schema (every migration), ROWS cancelled runs with a running attempt and their first event. */
function storeWorld(): World {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-stmt-'));
  const store = openSqliteStore(path.join(dir, 'bench.db'));
  const db = driverOf(store.database);
  const run =
    db.prepare(`INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    VALUES (?, 'project-a', 'runtime', 'running', 1, ?, 'user', 2, ?, ?)`);
  const attempt = db.prepare(
    `INSERT INTO attempts (run_id, id, status, pid, handle, created_at_ms, updated_at_ms) VALUES (?, ?, 'running', 4242, '{"v":1}', ?, ?)`,
  );
  const event = db.prepare(
    `INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms) VALUES (?, 1, ?, 'run.cancel_requested', '{"reason":"user"}', ?)`,
  );
  const s = lazyPreparedSet(db, SQL);
  db.transaction(() => {
    for (let i = 0; i < ROWS; i += 1) {
      run.run(runId(i), NOW, NOW, NOW);
      attempt.run(runId(i), attemptId(i), NOW, NOW);
      event.run(runId(i), `${runId(i)}-e1`, NOW);
      // The cancel request writes the pending dispatch (docs/decisions/0022); the claim leases it.
      s.insertPendingDispatch.run({ runId: runId(i), nowMs: NOW });
    }
  })();
  const steps: Steps = {
    'claim: read run': (i) => s.selectRun.get(runId(i)),
    'claim: read attempt status': (i) => s.selectAttemptStatus.get(runId(i), attemptId(i)),
    'claim: read dispatch': (i) => s.selectDispatch.get(runId(i)),
    'claim: lease (store) / insert leased (hand-written)': (i) =>
      s.leaseDispatch.get({
        runId: runId(i),
        attemptId: attemptId(i),
        version: 0,
        owner: 'w',
        digest: DIGEST,
        expiresAtMs: NOW + 60_000,
        nowMs: NOW,
      }),
    'settle: fenced update': (i) =>
      s.settleDispatch.get({
        runId: runId(i),
        attemptId: attemptId(i),
        owner: 'w',
        expectedVersion: 1,
        digest: DIGEST,
        status: 'dispatched',
        result: 'termination_requested',
        nextAttemptAtMs: null,
        blockedAtMs: null,
        nowMs: NOW,
      }),
    'settle: read run version': (i) => s.selectRunVersion.get(runId(i)),
    'settle: reserve event seq': (i) => s.reserveEventSeq.get({ runId: runId(i), version: 1, nowMs: NOW }),
    'settle: insert event': (i) =>
      s.insertEvent.run({
        runId: runId(i),
        seq: 2,
        eventId: `${runId(i)}-e2`,
        type: 'run.cancel_dispatched',
        payload: payload(i),
        nowMs: NOW,
      }),
  };
  return {
    database: db,
    steps,
    close: () => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The hand-written cycle's schema and statements (bench/dispatch-throughput.ts), step for step. */
function handWorld(): World {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-stmt-'));
  const db = new Database(path.join(dir, 'hand.db'));
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL,
      cancel_requested_at_ms INTEGER, next_event_seq INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL);
    CREATE TABLE attempts (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, status TEXT NOT NULL);
    CREATE TABLE dispatches (run_id TEXT PRIMARY KEY, attempt_id TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL,
      dispatch_count INTEGER NOT NULL, next_attempt_at_ms INTEGER, lease_owner TEXT, lease_token_digest TEXT,
      lease_expires_at_ms INTEGER, last_result TEXT, updated_at_ms INTEGER NOT NULL);
    CREATE TABLE events (id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
      payload TEXT NOT NULL, created_at_ms INTEGER NOT NULL);`);
  const run = db.prepare("INSERT INTO runs VALUES (?, 'runtime', 'running', 1, ?, 2, ?)");
  const attempt = db.prepare("INSERT INTO attempts VALUES (?, ?, 'running')");
  db.transaction(() => {
    for (let i = 0; i < ROWS; i += 1) {
      run.run(runId(i), NOW, NOW);
      attempt.run(attemptId(i), runId(i));
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
  const steps: Steps = {
    'claim: read run': (i) => selectRun.get(runId(i)),
    'claim: read attempt status': (i) => selectAttempt.get(attemptId(i), runId(i)),
    'claim: read dispatch': (i) => selectDispatch.get(runId(i)),
    'claim: lease (store) / insert leased (hand-written)': (i) =>
      insertLeased.run(runId(i), attemptId(i), 'w', DIGEST, NOW + 60_000, NOW),
    'settle: fenced update': (i) => settle.get('termination_requested', NOW, runId(i), attemptId(i), 'w', DIGEST, 1),
    'settle: read run version': (i) => selectRun.get(runId(i)),
    'settle: reserve event seq': (i) => reserve.get(NOW, runId(i), 1),
    'settle: insert event': (i) =>
      insertEvent.run(`${runId(i)}-e2`, runId(i), 2, 'run.cancel_dispatched', payload(i), NOW),
  };
  return {
    database: db,
    steps,
    close: () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** µs of CPU per call of each step, the steps run in cycle order over ROWS rows inside one transaction. */
function measure(open: () => World): Map<string, number> {
  const world = open();
  const costs = new Map<string, number>();
  try {
    world.database.transaction(() => {
      for (const [name, step] of Object.entries(world.steps)) {
        const started = process.cpuUsage();
        for (let i = 0; i < ROWS; i += 1) step(i);
        const used = process.cpuUsage(started);
        costs.set(name, (used.user + used.system) / ROWS);
      }
    })();
  } finally {
    world.close();
  }
  return costs;
}

/** µs of CPU per insert into a one-table schema whose rule is written in `ddl`. */
function insertCost(ddl: string): number {
  const db = new Database(':memory:');
  try {
    db.exec(ddl);
    const insert = db.prepare("INSERT INTO t VALUES (?, 'dispatched')");
    const started = process.cpuUsage();
    db.transaction(() => {
      for (let i = 0; i < ROWS; i += 1) insert.run(`row-${i}`);
    })();
    const used = process.cpuUsage(started);
    return (used.user + used.system) / ROWS;
  } finally {
    db.close();
  }
}

const STATUS_IN = "status IN ('pending', 'leased', 'retry_wait', 'dispatched', 'blocked')";
const STATUS_OR =
  "(status = 'pending' OR status = 'leased' OR status = 'retry_wait' OR status = 'dispatched' OR status = 'blocked')";
const DUE_IN = "status IN ('pending', 'retry_wait', 'leased')";
const DUE_OR = "(status = 'pending' OR status = 'retry_wait' OR status = 'leased')";
const TABLE = 'CREATE TABLE t (id TEXT PRIMARY KEY, status TEXT NOT NULL';
const SPELLINGS: ReadonlyArray<readonly [string, string]> = [
  ['no rule', `${TABLE}) STRICT, WITHOUT ROWID;`],
  ['CHECK, 5-value IN list', `${TABLE} CHECK (${STATUS_IN})) STRICT, WITHOUT ROWID;`],
  ['CHECK, the same rule with OR', `${TABLE} CHECK (${STATUS_OR})) STRICT, WITHOUT ROWID;`],
  [
    'partial index WHERE, 3-value IN list',
    `${TABLE}) STRICT, WITHOUT ROWID; CREATE INDEX t_due ON t (status, id) WHERE ${DUE_IN};`,
  ],
  [
    'partial index WHERE, the same with OR',
    `${TABLE}) STRICT, WITHOUT ROWID; CREATE INDEX t_due ON t (status, id) WHERE ${DUE_OR};`,
  ],
];

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const us = (value: number): string => value.toFixed(2);

function main(): void {
  console.log('# SQLite statement costs of the claim + settle cycle');
  console.log(
    machineHeader([
      `rows: ${ROWS} per round, rounds: ${ROUNDS}, CPU µs per call, median of rounds (PIDFENCE_BENCH_ROWS / _ROUNDS override)`,
    ]),
  );
  const store: Array<Map<string, number>> = [];
  const hand: Array<Map<string, number>> = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    hand.push(measure(handWorld));
    store.push(measure(storeWorld));
  }
  console.log('');
  console.log('| step | store µs | hand-written µs | store ÷ hand-written |');
  console.log('| --- | ---: | ---: | ---: |');
  let storeSum = 0;
  let handSum = 0;
  for (const name of store[0]?.keys() ?? []) {
    const s = median(store.map((costs) => costs.get(name) ?? Number.NaN));
    const h = median(hand.map((costs) => costs.get(name) ?? Number.NaN));
    storeSum += s;
    handSum += h;
    console.log(`| ${name} | ${us(s)} | ${us(h)} | ${(s / h).toFixed(2)} |`);
  }
  console.log(
    `| all statements of one cycle | ${us(storeSum)} | ${us(handSum)} | ${(storeSum / handSum).toFixed(2)} |`,
  );

  console.log('');
  console.log('| one insert into a table whose rule is | µs | ÷ no rule |');
  console.log('| --- | ---: | ---: |');
  const costs = SPELLINGS.map(
    ([name, ddl]) => [name, median(Array.from({ length: ROUNDS }, () => insertCost(ddl)))] as const,
  );
  const none = costs[0]?.[1] ?? Number.NaN;
  for (const [name, cost] of costs) console.log(`| ${name} | ${us(cost)} | ${(cost / none).toFixed(2)} |`);
}

main();
