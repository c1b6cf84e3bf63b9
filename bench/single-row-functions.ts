// What one plpgsql home costs (issue 31 item 2, docs/decisions/0231): a claim + settle cycle through
// pidfence_claim / pidfence_record_result as production calls them (since migration 0013 the page
// functions with one row) against migration 0007's own single-row bodies, installed side by side in
// the same database under other names, called the same way (named prepared statements, one client),
// rounds interleaved. Latency per call, with ratios against the 0007 bodies: once as deployed (each
// commit waits for its WAL flush) and once with synchronous_commit off, where the functions' own work
// is not hidden behind the flush.
// Run: npm run bench:single-row
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { Pool } from 'pg';

import { classifyResult, createLeaseToken, leaseTokenDigest } from '../lib/contract/index';
import { migrationsDirectory } from '../lib/store/migrations';
import { DISPATCH_SQL } from '../lib/store/postgres/dispatch-statements';
import { runtimeUrlNamed, type MigratedDatabase } from '../test/helpers/pg-store';
import { CANCELLED_AT_MS, seedRuns, serverVersion, withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { summarize } from './lib/stats';
import { renderTable, renderTargets, ratioOf, type Row } from './lib/table';

const CYCLES = Number(process.env.PIDFENCE_BENCH_CYCLES ?? 500);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_ROUNDS ?? 4);
const OLD_PREFIX = 'bench_0007_';
/** USER_HZ: /proc times count in these (100 on Linux x86-64 and arm64). */
const CLOCK_TICKS_PER_SECOND = 100;

interface Side {
  readonly name: string;
  readonly claimCall: string;
  readonly recordResultCall: string;
}

const SIDES: readonly Side[] = [
  {
    name: 'page of one (0013, production)',
    claimCall: DISPATCH_SQL.claimCall,
    recordResultCall: DISPATCH_SQL.recordResultCall,
  },
  {
    name: 'single-row body (0007)',
    claimCall: DISPATCH_SQL.claimCall.replace('pidfence_claim(', `${OLD_PREFIX}claim(`),
    recordResultCall: DISPATCH_SQL.recordResultCall.replace('pidfence_record_result(', `${OLD_PREFIX}record_result(`),
  },
];

/** Migration 0007's two functions, renamed, created by the owner and callable by the runtime role. */
async function installOldBodies(db: MigratedDatabase): Promise<void> {
  const text = readFileSync(path.join(migrationsDirectory('postgres'), '0007_dispatch_functions.sql'), 'utf8');
  const bodies = [...text.matchAll(/CREATE FUNCTION pidfence_(claim|record_result)\([\s\S]*?\n\$\$;/g)];
  if (bodies.length !== 2) throw new Error(`bench: found ${bodies.length} of the two 0007 functions`);
  for (const [body, name] of bodies) {
    const renamed = body.replace(`CREATE FUNCTION pidfence_${name}(`, `CREATE FUNCTION ${OLD_PREFIX}${name}(`);
    await db.owner.query(renamed);
    const signature = (
      await db.owner.query<{ s: string }>(`SELECT '${OLD_PREFIX}${name}'::regproc::regprocedure::text AS s`)
    ).rows[0]?.s;
    await db.owner.query(`GRANT EXECUTE ON FUNCTION ${signature ?? 'missing'} TO "${db.runtimeRole}"`);
  }
}

interface Mode {
  readonly name: string;
  readonly url: (db: MigratedDatabase) => string;
}

const MODES: readonly Mode[] = [
  { name: 'commit flush (as deployed)', url: (db) => db.runtimeUrl },
  { name: 'synchronous_commit off', url: (db) => runtimeUrlNamed(db, 'pidfence_bench', { synchronous_commit: 'off' }) },
];

type Samples = { claim: number[]; settle: number[]; cpuTicks: number; cycles: number };

/** The backend's CPU time so far (utime + stime, clock ticks), from its /proc stat read from the last ')'. */
function backendTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of stat(5); the slice starts at field 3.
  return Number(fields[11]) + Number(fields[12]);
}

/** One round of one side: `CYCLES` fresh runs, each claimed then settled; the two latencies in ns. */
async function round(db: MigratedDatabase, mode: Mode, side: Side, prefix: string, into: Samples): Promise<void> {
  await seedRuns(db, prefix, CYCLES);
  const pool = new Pool({ connectionString: mode.url(db), max: 1 });
  const settled = classifyResult('termination_requested');
  try {
    const backend = Number((await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid);
    const ticksBefore = backendTicks(backend);
    for (let i = 0; i < CYCLES; i += 1) {
      const runId = `${prefix}${i}`;
      const digest = leaseTokenDigest(createLeaseToken());
      let started = process.hrtime.bigint();
      const claim = await pool.query({
        name: `claim-${side.name}`,
        text: side.claimCall,
        values: [runId, `${runId}-a1`, CANCELLED_AT_MS, 'bench', digest, 60_000],
      });
      into.claim.push(Number(process.hrtime.bigint() - started));
      const outcome = claim.rows[0]?.outcome as { kind: string; record: { version: number } };
      if (outcome.kind !== 'claimed') throw new Error(`bench: claim was ${outcome.kind}`);
      started = process.hrtime.bigint();
      const result = await pool.query({
        name: `settle-${side.name}`,
        text: side.recordResultCall,
        values: [
          runId,
          `${runId}-a1`,
          'bench',
          digest,
          outcome.record.version,
          settled.status,
          'termination_requested',
          null,
          false,
          `${runId}-e2`,
          settled.eventType,
        ],
      });
      into.settle.push(Number(process.hrtime.bigint() - started));
      if ((result.rows[0]?.outcome as { kind: string }).kind !== 'recorded') throw new Error('bench: settle failed');
    }
    into.cpuTicks += backendTicks(backend) - ticksBefore;
    into.cycles += CYCLES;
  } finally {
    await pool.end();
  }
}

/** Both sides of one mode, rounds interleaved so load from other work falls on both alike; the table rows. */
async function modeRows(db: MigratedDatabase, mode: Mode, m: number): Promise<{ rows: Row[]; cpu: number[] }> {
  const samples: Samples[] = SIDES.map(() => ({ claim: [], settle: [], cpuTicks: 0, cycles: 0 }));
  for (let r = 0; r < ROUNDS; r += 1) {
    for (const [s, side] of SIDES.entries()) await round(db, mode, side, `m${m}r${r}s${s}-`, samples[s] as Samples);
  }
  const old = SIDES[1]?.name ?? '';
  const rows = SIDES.flatMap((side, s) =>
    (['claim', 'settle'] as const).map((call) => {
      const summary = summarize(samples[s]?.[call] ?? []);
      const baseline = s === 0 ? { baseline: `${call}: ${old}` } : {};
      return {
        name: `${call}: ${side.name}`,
        median: summary.median,
        p99: summary.p99,
        samples: summary.count,
        ...baseline,
      };
    }),
  );
  // Backend CPU per cycle in µs: what the functions cost the server, whatever else the machine runs.
  const cpu = samples.map((side) => (side.cpuTicks * (1e6 / CLOCK_TICKS_PER_SECOND)) / side.cycles);
  return { rows, cpu };
}

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    await installOldBodies(db);
    console.log('# One plpgsql home: the single-row call as a page of one vs the 0007 single-row bodies');
    console.log(
      machineHeader([
        `${await serverVersion(db)}`,
        `${CYCLES} cycles x ${ROUNDS} rounds per side and mode, 1 client, interleaved`,
      ]),
    );
    const [current, old] = SIDES.map((side) => side.name) as [string, string];
    for (const [m, mode] of MODES.entries()) {
      const { rows, cpu } = await modeRows(db, mode, m);
      console.log(`\n## ${mode.name}\n`);
      console.log(renderTable(rows));
      console.log('');
      console.log(
        `Server backend CPU per claim + settle cycle: ${SIDES.map((side, s) => `${side.name} ${Math.round(cpu[s] ?? 0)} µs`).join(', ')}` +
          ` (ratio ${((cpu[0] ?? 0) / (cpu[1] ?? 1)).toFixed(2)}x)`,
      );
      console.log('');
      console.log(
        renderTargets(
          ['claim', 'settle'].map((call) => ({
            name: `${call} latency, page of one vs 0007 body (${mode.name})`,
            ratio: ratioOf(rows, `${call}: ${current}`, `${call}: ${old}`),
            op: '<=' as const,
            limit: 1.25,
            detail: 'median per call; the price of writing each rule once',
          })),
        ),
      );
    }
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
