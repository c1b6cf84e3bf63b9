// Round trips and statements per claim and per settle, counted from the wire (issue 16 (d),
// docs/decisions/0021): every pooled connection's ReadyForQuery messages (one per round trip) and
// CommandComplete messages (one per top-level statement the server ran) while the repository
// claims and settles N runs. The "statement by statement" column is the pre-0007 recordResult, still
// taken when a test hook is set; the pre-0007 claim was the same shape (BEGIN, 3 locks, write, COMMIT).
// Run: npm run build && node dist/test/helpers/with-postgres.js node dist/bench/round-trips.js
import os from 'node:os';

import { Pool } from 'pg';

import { createLeaseToken } from '../lib/contract/index';
import { PostgresDispatchRepository, type PostgresRepositoryOptions } from '../lib/store/postgres/index';
import { seedRuns, serverVersion, withBenchDatabase } from './lib/dispatch-postgres';

const RUNS = Number(process.env.PIDFENCE_BENCH_RUNS ?? 200);
const CANCELLED_AT_MS = 1_700_000_000_000;

interface WireCounts {
  roundTrips: number;
  statements: number;
}

/** A pool whose connections count their protocol messages into `counts`. */
function countingPool(url: string, counts: WireCounts): Pool {
  const pool = new Pool({ connectionString: url, max: 1 });
  pool.on('connect', (client) => {
    const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
    connection.on('readyForQuery', () => { counts.roundTrips += 1; });
    connection.on('commandComplete', () => { counts.statements += 1; });
  });
  return pool;
}

interface PerCall {
  readonly claim: WireCounts;
  readonly settle: WireCounts;
}

async function measure(url: string, prefix: string, options: PostgresRepositoryOptions): Promise<PerCall> {
  const counts: WireCounts = { roundTrips: 0, statements: 0 };
  const pool = countingPool(url, counts);
  const repository = new PostgresDispatchRepository(pool, options);
  const totals = { claim: { roundTrips: 0, statements: 0 }, settle: { roundTrips: 0, statements: 0 } };
  const add = (into: WireCounts, before: WireCounts) => {
    into.roundTrips += counts.roundTrips - before.roundTrips;
    into.statements += counts.statements - before.statements;
  };
  try {
    await pool.query('SELECT 1');
    for (let i = 0; i < RUNS; i += 1) {
      const runId = `${prefix}${i}`;
      const token = createLeaseToken();
      const beforeClaim = { ...counts };
      const claim = await repository.claim({ runId, attemptId: `${runId}-a1`, cancelRequestedAtMs: CANCELLED_AT_MS, owner: 'bench', token, leaseDurationMs: 60_000 });
      add(totals.claim, beforeClaim);
      if (claim.kind !== 'claimed') throw new Error(`bench: claim was ${claim.kind}`);
      const beforeSettle = { ...counts };
      const settled = await repository.recordResult({ runId, attemptId: `${runId}-a1`, owner: 'bench', token, expectedVersion: claim.record.version, result: 'termination_requested', eventId: `${runId}-e2` });
      add(totals.settle, beforeSettle);
      if (settled.kind !== 'recorded') throw new Error('bench: settle failed');
    }
  } finally {
    await pool.end();
  }
  const per = (value: number) => value / RUNS;
  return {
    claim: { roundTrips: per(totals.claim.roundTrips), statements: per(totals.claim.statements) },
    settle: { roundTrips: per(totals.settle.roundTrips), statements: per(totals.settle.statements) },
  };
}

const verdict = (value: number) => (value <= 1 ? 'PASS' : 'MISS');

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    await seedRuns(db, 'rt-one-', RUNS);
    await seedRuns(db, 'rt-step-', RUNS);
    const one = await measure(db.runtimeUrl, 'rt-one-', {});
    const unnamed = await measure(db.runtimeUrl, 'rt-step-', { preparedStatements: false, hooks: { afterDispatchUpdate: async () => undefined } });
    console.log('# round trips and statements per call (PostgreSQL, counted from the wire)');
    console.log(`machine: ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${os.platform()} ${os.release()}, Node ${process.version}, ${await serverVersion(db)}`);
    console.log(`date: ${new Date().toISOString()}`);
    console.log(`command: node dist/bench/round-trips.js (runs=${RUNS}; ReadyForQuery and CommandComplete messages per call)`);
    console.log('');
    console.log('| call | round trips (target 1) | statements on the wire | statement by statement: round trips | statements |');
    console.log('| --- | ---: | ---: | ---: | ---: |');
    console.log(`| claim | ${one.claim.roundTrips} ${verdict(one.claim.roundTrips)} | ${one.claim.statements} | ${unnamed.claim.roundTrips} (function, unnamed) | ${unnamed.claim.statements} |`);
    console.log(`| settle | ${one.settle.roundTrips} ${verdict(one.settle.roundTrips)} | ${one.settle.statements} | ${unnamed.settle.roundTrips} | ${unnamed.settle.statements} |`);
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
