// A project-wide cancel, set-based against the per-run path it replaced (issue 29; docs/decisions/0320,
// 0203). Not a test. Each size gets a fresh project of running runs (an active attempt each, so each
// cancel writes a pending dispatch) and queued ones (a tenth; each ends `cancelled`), seeded by the
// owner in SQL. Both sides cancel the same shape on the same database, one after the other:
// - per-run (f1d0cfa): main's control-plane path, kept here only as the baseline: keyset pages of 500
//   active runs, each run's intent through PostgresRunStore.requestCancellation and a queued one's end
//   through ClusterLeaseStore.cancelIfQueued, four at a time;
// - set-based: PostgresRunStore.requestProjectCancellation, one call of migration 0018's function.
// Round trips and statements are counted on the wire; transactions are the distinct xmin of the rows
// written (every run, its events and its dispatch row).
// Run: npm run bench:project-cancel
import { Pool } from 'pg';

import { ClusterLeaseStore } from '../lib/cluster/index';
import { PostgresExecutionStore, PostgresRunStore } from '../lib/store/postgres/index';
import type { MigratedDatabase } from '../test/helpers/pg-store';
import { tallyWire, wireSince, type WireTally } from '../test/helpers/wire-tally';
import { withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { renderGrid } from './lib/table';

const SIZES = (process.env.PIDFENCE_BENCH_PROJECT_CANCEL_SIZES ?? '1000,5000').split(',').map((size) => Number(size));
/** The per-run path is run up to this size (about 5-8 s a thousand runs on this loaded machine). */
const PER_RUN_MAX = Number(process.env.PIDFENCE_BENCH_PROJECT_CANCEL_PER_RUN_MAX ?? 5000);
const T0 = 1_700_000_000_000;

/** main's (f1d0cfa) page of a project's active runs, kept only here as the baseline's walk. */
const ACTIVE_RUNS_OF_PROJECT = `SELECT id AS "runId", status FROM runs
  WHERE project_id = $1 AND owner = 'runtime' AND status IN ('queued', 'running') AND id > $2 ORDER BY id LIMIT $3`;
const PAGE = 500;
const LANES = 4;

/** `count` active runs of `projectId`: nine in ten running with an active attempt, one in ten queued. */
async function seedProject(db: MigratedDatabase, projectId: string, count: number): Promise<string[]> {
  await db.owner.query(
    `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
     SELECT $1 || '-' || lpad(g::text, 6, '0'), $1, 'runtime', CASE WHEN g % 10 = 0 THEN 'queued' ELSE 'running' END,
       0, NULL, NULL, 1, $3::bigint, $3::bigint FROM generate_series(0, $2::int - 1) AS g`,
    [projectId, count, T0],
  );
  await db.owner.query(
    `INSERT INTO attempts (run_id, id, status, created_at_ms, updated_at_ms)
     SELECT id, id || '-a1', 'running', $2::bigint, $2::bigint FROM runs WHERE project_id = $1 AND status = 'running'`,
    [projectId, T0],
  );
  await db.owner.query('ANALYZE runs, attempts');
  const { rows } = await db.owner.query<{ id: string }>('SELECT id FROM runs WHERE project_id = $1', [projectId]);
  return rows.map((row) => row.id);
}

/** The baseline: main's control-plane walk, one transaction per run (two for a queued one). */
async function perRunCancel(pool: Pool, projectId: string): Promise<number> {
  const runStore = new PostgresRunStore(pool);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: 15_000 });
  let requested = 0;
  let after = '';
  for (;;) {
    const { rows } = await pool.query<{ runId: string }>(ACTIVE_RUNS_OF_PROJECT, [projectId, after, PAGE]);
    let next = 0;
    await Promise.all(
      Array.from({ length: LANES }, async () => {
        while (next < rows.length) {
          const runId = (rows[next++] as { runId: string }).runId;
          const outcome = await runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${runId}` });
          if (outcome.kind === 'requested') requested++;
          if (outcome.kind === 'requested' && outcome.run.status === 'queued') await leases.cancelIfQueued(runId);
        }
      }),
    );
    if (rows.length < PAGE) return requested;
    after = (rows[rows.length - 1] as { runId: string }).runId;
  }
}

async function setBasedCancel(pool: Pool, projectId: string): Promise<number> {
  let requested = 0;
  for (;;) {
    const outcome = await new PostgresRunStore(pool).requestProjectCancellation({ projectId, reason: 'user' });
    requested += outcome.requested;
    if (!outcome.more) return requested;
  }
}

async function transactionsOf(db: MigratedDatabase, runIds: readonly string[]): Promise<number> {
  const { rows } = await db.owner.query<{ n: number }>(
    `SELECT count(DISTINCT x)::int AS n FROM (
       SELECT xmin::text AS x FROM runs WHERE id = ANY ($1)
       UNION ALL SELECT xmin::text FROM run_events WHERE run_id = ANY ($1)
       UNION ALL SELECT xmin::text FROM cancellation_dispatches WHERE run_id = ANY ($1)) AS written`,
    [runIds],
  );
  return rows[0]?.n ?? 0;
}

interface Measured {
  readonly ms: number;
  readonly wire: WireTally;
  readonly transactions: number;
}

async function measure(
  db: MigratedDatabase,
  side: string,
  size: number,
  cancel: (pool: Pool, projectId: string) => Promise<number>,
): Promise<Measured> {
  const projectId = `bench-${side}-${size}`;
  const runIds = await seedProject(db, projectId, size);
  const pool = new Pool({ connectionString: db.runtimeUrl, max: LANES });
  const wire = tallyWire(pool);
  try {
    // Connections opened and checked first: their one-time checks are not the cancel's cost.
    const warm = new PostgresRunStore(pool);
    await Promise.all(Array.from({ length: LANES }, () => warm.getRun(runIds[0] as string)));
    const before = { ...wire };
    const started = performance.now();
    const requested = await cancel(pool, projectId);
    const ms = performance.now() - started;
    if (requested !== size) throw new Error(`${side}: ${requested} of ${size} intents written`);
    return { ms, wire: wireSince(before, wire), transactions: await transactionsOf(db, runIds) };
  } finally {
    await pool.end();
  }
}

function row(size: number, side: string, m: Measured, baseline: Measured | undefined): string[] {
  return [
    String(size),
    side,
    m.ms.toFixed(0),
    String(m.wire.roundTrips),
    String(m.wire.statements),
    String(m.transactions),
    baseline === undefined ? '—' : `${(baseline.ms / m.ms).toFixed(1)}x`,
  ];
}

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    console.log('## Project-wide cancel');
    console.log('');
    console.log(
      machineHeader([
        'command: npm run bench:project-cancel',
        'runs: nine in ten running with an active attempt, one in ten queued; one database, four pool connections',
      ]),
    );
    console.log('');
    const rows: string[][] = [];
    for (const size of SIZES) {
      const baseline = size <= PER_RUN_MAX ? await measure(db, 'per-run', size, perRunCancel) : undefined;
      if (baseline !== undefined) rows.push(row(size, 'per-run (f1d0cfa)', baseline, undefined));
      rows.push(row(size, 'set-based (0018)', await measure(db, 'set', size, setBasedCancel), baseline));
    }
    console.log(
      renderGrid(['runs', 'path', 'ms', 'round trips', 'statements', 'transactions', 'speed-up vs per-run'], rows, [
        true,
        false,
        true,
        true,
        true,
        true,
        true,
      ]),
    );
  });
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
