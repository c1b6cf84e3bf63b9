// Burst drain (issue 19 (b)): 10,000 runs cancelled at once on PostgreSQL, drained by the real
// Supervisor + Dispatcher (due page claimed as it is read, docs/decisions/0025) with a controller that answers at once,
// vs pg-boss 10.4.2 draining 10,000 jobs with its batch fetch and batch complete. Time to empty and
// dispatches/s, 1 and 4 drainers. Target: pidfence / pg-boss ≥ 2 (dispatches/s).
// Run: npm run bench:burst   Env: PIDFENCE_BENCH_BURST (10000), PIDFENCE_BENCH_ROUNDS (3).
import PgBoss from 'pg-boss';
import { Pool } from 'pg';

import { ControllerRegistry, Dispatcher, Supervisor, profile, type TerminationController } from '../lib/dispatch/index';
import type { TerminationOutcome } from '../lib/process/index';
import { PostgresDispatchRepository, PostgresRunStore } from '../lib/store/postgres/index';
import type { MigratedDatabase } from '../test/helpers/pg-store';
import { seedRuns, serverVersion, withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { renderGrid } from './lib/table';

const BURST = Number(process.env.PIDFENCE_BENCH_BURST ?? 10_000);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_ROUNDS ?? 3);
const DRAINERS = [1, 4] as const;
const TARGET = 2;

/** Answers termination_requested at once: the drain's cost is the store's, not a process's. */
class ImmediateController implements TerminationController {
  readonly platform = 'linux';
  boundMs(graceMs: number): number {
    return graceMs + 100;
  }
  async requestTermination(): Promise<TerminationOutcome> {
    return { result: 'termination_requested', escalated: false, exitObserved: false };
  }
}

/**
 * Seconds to drain, and the items a drainer read but did not claim (passed over while another
 * drainer held them, or lost to it): each drainer runs standalone supervisor cycles until one finds
 * nothing due.
 */
async function drainPidfence(
  db: MigratedDatabase,
  drainers: number,
  round: string,
): Promise<{ seconds: number; notClaimed: number }> {
  await seedRuns(db, `burst-${round}-`, BURST, '{"platform":"linux"}');
  const pool = new Pool({ connectionString: db.runtimeUrl, max: drainers * 2 });
  const standalone = profile('standalone');
  try {
    const repository = new PostgresDispatchRepository(pool);
    const runStore = new PostgresRunStore(pool);
    const supervisors = Array.from(
      { length: drainers },
      (_, i) =>
        new Supervisor({
          repository,
          dispatcher: new Dispatcher({
            repository,
            runStore,
            controllers: new ControllerRegistry([new ImmediateController()]),
            graceMs: 0,
            leaseDurationMs: 60_000,
            owner: `burst-${i}`,
          }),
          pageSize: standalone.pageSize,
          pagesPerCycle: standalone.pagesPerCycle,
        }),
    );
    let dispatched = 0;
    let notClaimed = 0;
    const started = process.hrtime.bigint();
    await Promise.all(
      supervisors.map(async (supervisor) => {
        for (;;) {
          const report = await supervisor.runCycle();
          dispatched += report.dispatched;
          notClaimed += report.notClaimed;
          if (report.items === 0) return;
        }
      }),
    );
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (dispatched !== BURST) throw new Error(`bench: drained ${dispatched} of ${BURST}`);
    return { seconds, notClaimed };
  } finally {
    await pool.end();
  }
}

/** pg-boss: fetch a batch of 32, complete the batch by ids, until the queue is empty. */
async function drainPgBoss(db: MigratedDatabase, drainers: number, round: string): Promise<number> {
  const queue = `burst_${round.replace(/[^a-z0-9]/g, '_')}`;
  const boss = new PgBoss({ connectionString: db.ownerUrl, max: drainers * 2, supervise: false, schedule: false });
  boss.on('error', () => undefined);
  await boss.start();
  try {
    await boss.createQueue(queue);
    for (let i = 0; i < BURST; i += 1000) {
      await boss.insert(
        Array.from({ length: Math.min(1000, BURST - i) }, (_, j) => ({ name: queue, data: { runId: `run-${i + j}` } })),
      );
    }
    let completed = 0;
    const started = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: drainers }, async () => {
        for (;;) {
          const jobs = await boss.fetch(queue, { batchSize: profile('standalone').pageSize });
          if (jobs.length === 0) return;
          await boss.complete(
            queue,
            jobs.map((job) => job.id),
          );
          completed += jobs.length;
        }
      }),
    );
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (completed !== BURST) throw new Error(`bench: pg-boss completed ${completed} of ${BURST}`);
    return seconds;
  } finally {
    await boss.stop({ graceful: false, wait: true, timeout: 1_000 });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const fmt = (value: number, digits = 0) =>
  value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    console.log('# burst drain (PostgreSQL)');
    console.log('');
    console.log(
      machineHeader([
        `${await serverVersion(db)}, pg-boss 10.4.2`,
        `method: ${fmt(BURST)} cancelled runs with their pending dispatch seeded at once; drainers run standalone supervisor cycles (page 32 claimed as it is read, 4 pages a cycle) with a controller that answers termination_requested at once, until a cycle finds nothing; pg-boss: ${fmt(BURST)} jobs, fetch batchSize 32 + complete by ids, until fetch is empty. Median of ${ROUNDS} rounds, sides alternated`,
      ]),
    );
    console.log('');
    const body: string[][] = [];
    for (const drainers of DRAINERS) {
      const pid: number[] = [];
      const wasted: number[] = [];
      const boss: number[] = [];
      for (let round = 0; round < ROUNDS; round += 1) {
        const name = `d${drainers}r${round}`;
        const drainOurs = async (): Promise<void> => {
          const { seconds, notClaimed } = await drainPidfence(db, drainers, name);
          pid.push(seconds);
          wasted.push(notClaimed);
        };
        if (round % 2 === 0) {
          await drainOurs();
          boss.push(await drainPgBoss(db, drainers, name));
        } else {
          boss.push(await drainPgBoss(db, drainers, name));
          await drainOurs();
        }
      }
      const [p, b] = [median(pid), median(boss)];
      const ratio = BURST / p / (BURST / b);
      body.push([
        String(drainers),
        `${fmt(p, 2)} s`,
        fmt(BURST / p),
        fmt(median(wasted)),
        `${fmt(b, 2)} s`,
        fmt(BURST / b),
        `${fmt(ratio, 2)}x ${ratio >= TARGET ? 'PASS' : 'MISS'}`,
      ]);
    }
    console.log(
      renderGrid(
        [
          'drainers',
          'pidfence time to empty',
          'pidfence dispatches/s',
          'pidfence items read, not claimed',
          'pg-boss time to empty',
          'pg-boss jobs/s',
          `pidfence / pg-boss (target ≥ ${TARGET})`,
        ],
        body,
        [true, true, true, true, true, true, true],
      ),
    );
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
