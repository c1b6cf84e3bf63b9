// Round trips and statements per claim and per settle, counted from the wire (issue 16 (d),
// docs/decisions/0021): every pooled connection's ReadyForQuery messages (one per round trip) and
// CommandComplete messages (one per top-level statement the server ran) while the repository
// claims and settles N runs (the pre-0007 statement-by-statement path is gone, docs/decisions/0033: the
// pre-0007 claim was six round trips, BEGIN with the limits, 3 locks, write, COMMIT; its settle seven).
// Run: npm run build && node dist/test/helpers/with-postgres.js node dist/bench/round-trips.js
import os from 'node:os';

import { Pool } from 'pg';

import { createLeaseToken } from '../lib/contract/index';
import { PostgresDispatchRepository, type PostgresRepositoryOptions } from '../lib/store/postgres/index';
import { CANCELLED_AT_MS, seedRuns, serverVersion, withBenchDatabase } from './lib/dispatch-postgres';

const RUNS = Number(process.env.PIDFENCE_BENCH_RUNS ?? 200);

interface WireCounts {
  roundTrips: number;
  statements: number;
}

/** A pool whose connections count their protocol messages into `counts`. */
function countingPool(url: string, counts: WireCounts): Pool {
  const pool = new Pool({ connectionString: url, max: 1 });
  pool.on('connect', (client) => {
    const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
    connection.on('readyForQuery', () => {
      counts.roundTrips += 1;
    });
    connection.on('commandComplete', () => {
      counts.statements += 1;
    });
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
    // Warmed through the store: a connection's first use also checks its synchronous_commit, once (docs/decisions/0010).
    await repository.getRecord(`${prefix}0`);
    for (let i = 0; i < RUNS; i += 1) {
      const runId = `${prefix}${i}`;
      const token = createLeaseToken();
      const beforeClaim = { ...counts };
      const claim = await repository.claim({
        runId,
        attemptId: `${runId}-a1`,
        cancelRequestedAtMs: CANCELLED_AT_MS,
        owner: 'bench',
        token,
        leaseDurationMs: 60_000,
      });
      add(totals.claim, beforeClaim);
      if (claim.kind !== 'claimed') throw new Error(`bench: claim was ${claim.kind}`);
      const beforeSettle = { ...counts };
      const settled = await repository.recordResult({
        runId,
        attemptId: `${runId}-a1`,
        owner: 'bench',
        token,
        expectedVersion: claim.record.version,
        result: 'termination_requested',
        eventId: `${runId}-e2`,
      });
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

const PAGE = 32;

/** One claimed page, as the settle needs it: each claimed item with its token and record version. */
type ClaimedItem = {
  readonly runId: string;
  readonly attemptId: string;
  readonly token: string;
  readonly version: number;
};

/** Claims the p-th page of 32: the items by id (claimPage, docs/decisions/0023) or the due page as it is read (claimDuePage, 0025). */
async function claimNextPage(
  repository: PostgresDispatchRepository,
  how: 'claimPage' | 'claimDuePage',
  prefix: string,
  p: number,
): Promise<ClaimedItem[]> {
  if (how === 'claimDuePage') {
    const tokens = Array.from({ length: PAGE }, () => createLeaseToken());
    const page = await repository.claimDuePage({ owner: 'bench', leaseDurationMs: 60_000, tokens });
    return page.items.map(({ item, outcome }, i) => {
      if (outcome.kind !== 'claimed') throw new Error(`bench: due page claim was ${outcome.kind}`);
      return {
        runId: item.runId,
        attemptId: item.attemptId,
        token: tokens[i] as string,
        version: outcome.record.version,
      };
    });
  }
  const items = Array.from({ length: PAGE }, (_, i) => {
    const runId = `${prefix}${p * PAGE + i}`;
    return { runId, attemptId: `${runId}-a1`, cancelRequestedAtMs: CANCELLED_AT_MS, token: createLeaseToken() };
  });
  const claims = await repository.claimPage({ owner: 'bench', leaseDurationMs: 60_000, items });
  return items.map((item, i) => {
    const claim = claims[i];
    if (claim?.kind !== 'claimed') throw new Error(`bench: page claim was ${claim?.kind}`);
    return { runId: item.runId, attemptId: item.attemptId, token: item.token, version: claim.record.version };
  });
}

/** A standalone page: a page claim of 32, then recordResults of the 32; counts per page. */
async function measurePage(
  url: string,
  prefix: string,
  how: 'claimPage' | 'claimDuePage',
): Promise<PerCall & { pages: number }> {
  const counts: WireCounts = { roundTrips: 0, statements: 0 };
  const pool = countingPool(url, counts);
  const repository = new PostgresDispatchRepository(pool);
  const totals = { claim: { roundTrips: 0, statements: 0 }, settle: { roundTrips: 0, statements: 0 } };
  const pages = Math.floor(RUNS / PAGE);
  try {
    await repository.getRecord(`${prefix}0`);
    for (let p = 0; p < pages; p += 1) {
      const before = { ...counts };
      const claimed = await claimNextPage(repository, how, prefix, p);
      totals.claim.roundTrips += counts.roundTrips - before.roundTrips;
      totals.claim.statements += counts.statements - before.statements;
      if (claimed.length !== PAGE) throw new Error(`bench: claimed ${claimed.length} of a page of ${PAGE}`);
      const commands = claimed.map((item) => ({
        runId: item.runId,
        attemptId: item.attemptId,
        owner: 'bench',
        token: item.token,
        expectedVersion: item.version,
        result: 'termination_requested' as const,
        eventId: `${item.runId}-e2`,
      }));
      const beforeSettle = { ...counts };
      const settled = await repository.recordResults(commands);
      totals.settle.roundTrips += counts.roundTrips - beforeSettle.roundTrips;
      totals.settle.statements += counts.statements - beforeSettle.statements;
      if (settled.some((outcome) => outcome.kind !== 'recorded')) throw new Error('bench: page settle failed');
    }
  } finally {
    await pool.end();
  }
  const per = (value: number) => value / pages;
  return {
    pages,
    claim: { roundTrips: per(totals.claim.roundTrips), statements: per(totals.claim.statements) },
    settle: { roundTrips: per(totals.settle.roundTrips), statements: per(totals.settle.statements) },
  };
}

const verdict = (value: number) => (value <= 1 ? 'PASS' : 'MISS');

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    const modes: Array<[string, PostgresRepositoryOptions]> = [
      ['named prepared statements (default)', {}],
      ['unnamed (preparedStatements: false)', { preparedStatements: false }],
    ];
    const rows: string[] = [];
    for (const [index, [label, options]] of modes.entries()) {
      await seedRuns(db, `rt-${index}-`, RUNS);
      const counted = await measure(db.runtimeUrl, `rt-${index}-`, options);
      const claim = `${counted.claim.roundTrips} ${verdict(counted.claim.roundTrips)} | ${counted.claim.statements}`;
      rows.push(
        `| ${label} | ${claim} | ${counted.settle.roundTrips} ${verdict(counted.settle.roundTrips)} | ${counted.settle.statements} |`,
      );
    }
    for (const how of ['claimPage', 'claimDuePage'] as const) {
      await seedRuns(db, `rt-${how}-`, RUNS);
      const page = await measurePage(db.runtimeUrl, `rt-${how}-`, how);
      rows.push(
        `| page of ${PAGE}: ${how}${how === 'claimDuePage' ? ' (the due read included)' : ''} + recordResults, per page (${page.pages} pages) | ${page.claim.roundTrips} ${verdict(page.claim.roundTrips)} | ${page.claim.statements} | ${page.settle.roundTrips} ${verdict(page.settle.roundTrips)} | ${page.settle.statements} |`,
      );
      rows.push(
        `| page of ${PAGE} (${how}), per item | ${(page.claim.roundTrips / PAGE).toFixed(3)} | ${(page.claim.statements / PAGE).toFixed(3)} | ${(page.settle.roundTrips / PAGE).toFixed(3)} | ${(page.settle.statements / PAGE).toFixed(3)} |`,
      );
    }
    console.log('# round trips and statements per call (PostgreSQL, counted from the wire)');
    console.log(
      `machine: ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${os.platform()} ${os.release()}, Node ${process.version}, ${await serverVersion(db)}, loadavg ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    console.log(`date: ${new Date().toISOString()}`);
    console.log(
      `command: node dist/bench/round-trips.js (runs=${RUNS}; ReadyForQuery and CommandComplete messages per call, mean)`,
    );
    console.log('');
    console.log(
      '| mode | claim round trips (target 1) | claim statements | settle round trips (target 1) | settle statements |',
    );
    console.log('| --- | ---: | ---: | ---: | ---: |');
    for (const row of rows) console.log(row);
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
