// The management suite (design/dispatch §6 gates 14-18) on a real PostgreSQL as the runtime role, grants
// written by the migration owner; plus the plan of the blocked page on a table large enough for
// the planner to choose freely (gate 18: the per-project partial index, no other project's rows).
import test from 'ava';
import { Pool } from 'pg';

import { openPostgresGrantAdministration, openPostgresStore, postgresReadiness } from '../../lib/store/postgres/index';
import { MANAGEMENT_SQL } from '../../lib/store/postgres/management-statements';
import {
  migratedDatabase,
  runtimeUrlNamed,
  SUITE_SESSION_SETTINGS,
  uniqueApplicationName,
  type MigratedDatabase,
} from '../helpers/pg-store';
import { registerManagementSuite, type ManagementWorld } from './management-suite';

let auditInjections = 0;
const CONTROL_STATEMENT = /^\s*(BEGIN|COMMIT|ROLLBACK|SET)\b/i;

let shared: Promise<MigratedDatabase> | undefined;
const database = (): Promise<MigratedDatabase> => (shared ??= migratedDatabase('management'));
test.after.always(async () => {
  if (shared !== undefined) await (await shared).dispose();
});

type Queryable = { query: (...args: unknown[]) => unknown };

async function openWorld(): Promise<ManagementWorld> {
  const db = await database();
  let recording: string[] | undefined;
  const pool = new Pool({
    connectionString: runtimeUrlNamed(db, uniqueApplicationName(), SUITE_SESSION_SETTINGS),
    max: 4,
  });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    const target = client as unknown as Queryable;
    const query = target.query.bind(client);
    target.query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string };
      const text = typeof first === 'string' ? first : (first?.text ?? '');
      if (!CONTROL_STATEMENT.test(text)) recording?.push(text);
      return query(...args);
    };
  });
  const store = await openPostgresStore(pool);
  const grants = openPostgresGrantAdministration(db.ownerUrl);
  return {
    runStore: store.runStore,
    repository: store.dispatchRepository,
    executionStore: store.executionStore,
    management: store.managementStore,
    grants,
    advanceTime: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    statementsOf: async (work) => {
      recording = [];
      try {
        const result = await work();
        return { result, statements: recording };
      } finally {
        recording = undefined;
      }
    },
    auditRows: async (runId) =>
      (
        await db.owner.query(
          'SELECT actor, expected_version::int AS "expectedVersion", expected_result AS "expectedResult" FROM management_audit WHERE run_id = $1 ORDER BY created_at_ms, id',
          [runId],
        )
      ).rows,
    injectAuditFailure: async (actor) => {
      // The owner adds a constraint no row of `actor` passes; NOT VALID leaves existing rows alone.
      const constraint = `inject_audit_failure_${auditInjections++}`;
      await db.owner.query(
        `ALTER TABLE management_audit ADD CONSTRAINT ${constraint} CHECK (actor <> '${actor}') NOT VALID`,
      );
      return async () => {
        await db.owner.query(`ALTER TABLE management_audit DROP CONSTRAINT ${constraint}`);
      };
    },
    close: async () => {
      await grants.close();
      await store.close();
      await pool.end();
    },
  };
}

registerManagementSuite({ name: 'postgres', open: openWorld });

test('the runtime role may read grants but not write them, and readiness holds it to exactly SELECT [postgres]', async (t) => {
  const db = await database();
  t.like(await postgresReadiness(db.runtimeUrl), { runtimeRole: db.runtimeRole });
  const asRuntime = openPostgresGrantAdministration(db.runtimeUrl);
  t.teardown(() => asRuntime.close());
  const error = await t.throwsAsync(
    asRuntime.writeGrant({ subject: 'mallory', projectId: 'p', permission: 'run.stop' }, 'mallory'),
  );
  t.is((error as { code?: string }).code, 'ERR_PIDFENCE_STORE_PRIVILEGE');
  t.false(await asRuntime.hasPermission('mallory', 'p', 'run.stop'));
  await db.owner.query(`GRANT INSERT ON management_grants TO "${db.runtimeRole}"`);
  const excess = await t.throwsAsync(postgresReadiness(db.runtimeUrl));
  t.is((excess as { code?: string }).code, 'ERR_PIDFENCE_PG_PRIVILEGE_EXCESS');
  t.regex(excess?.message ?? '', /INSERT on management_grants/);
  await db.owner.query(`REVOKE INSERT ON management_grants FROM "${db.runtimeRole}"`);
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Rows'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

test("gate 18: on 30,000 dispatches in 7 projects the blocked page is an index scan of the per-project partial index that touches no other project's rows [postgres]", async (t) => {
  const db = await database();
  const rows = 30_000;
  await db.owner
    .query(`INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    SELECT 'xr-' || g, 'xp-' || (g % 7), 'runtime', 'running', 1, 1000, 'user', 2, 1000, 1000 FROM generate_series(1, ${rows}) AS g`);
  await db.owner.query(`INSERT INTO attempts (run_id, id, status, created_at_ms, updated_at_ms)
    SELECT 'xr-' || g, 'xr-' || g || '-a1', 'running', 1000, 1000 FROM generate_series(1, ${rows}) AS g`);
  await db.owner
    .query(`INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, last_result,
      last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    SELECT 'xr-' || g, 'xp-' || (g % 7), 'xr-' || g || '-a1',
      CASE WHEN g % 3 = 0 THEN 'blocked' ELSE 'dispatched' END, 2, 1,
      CASE WHEN g % 3 = 0 THEN 'identity_mismatch' ELSE 'already_exited' END,
      1000, CASE WHEN g % 3 = 0 THEN 2000 + g ELSE NULL END, 1000, 1000
    FROM generate_series(1, ${rows}) AS g`);
  await db.owner.query('ANALYZE runs, attempts, cancellation_dispatches');

  const runtime = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  t.teardown(() => runtime.end());
  const explain = async (params: unknown[]): Promise<PlanNode[]> => {
    const result = await runtime.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${MANAGEMENT_SQL.blockedPage}`, params);
    const plan = (result.rows[0] as { 'QUERY PLAN': Array<{ Plan: PlanNode }> })['QUERY PLAN'][0]?.Plan;
    if (plan === undefined) throw new Error('no plan');
    return nodes(plan);
  };
  for (const params of [
    ['xp-3', 10_000_000, -1, '', 17],
    ['xp-3', 10_000_000, 12_000, 'xr-10000', 17],
  ]) {
    const plan = await explain(params);
    const scans = plan.filter((node) => node['Relation Name'] === 'cancellation_dispatches');
    t.is(scans.length, 1, JSON.stringify(plan));
    const [scan] = scans;
    t.true(['Index Scan', 'Index Only Scan'].includes(scan?.['Node Type'] ?? ''), scan?.['Node Type']);
    t.is(scan?.['Index Name'], 'cancellation_dispatches_blocked');
    t.regex(scan?.['Index Cond'] ?? '', /^\(\(project_id = 'xp-3'::text\) AND .*ROW\(blocked_at_ms, run_id\) > ROW/);
    t.false(plan.some((node) => /Seq Scan|Bitmap/.test(node['Node Type'])));
    // Every row the scan produced was one of this project's blocked rows, and no more than a page + 1.
    t.is(scan?.['Rows Removed by Filter'] ?? 0, 0);
    t.true((scan?.['Actual Rows'] ?? 99) <= 17);
  }
  const page = await runtime.query(MANAGEMENT_SQL.blockedPage, ['xp-3', 10_000_000, -1, '', 17]);
  t.is(page.rows.length, 17);
  t.true(
    page.rows.every(
      (row: { runId: string }) => Number(row.runId.slice(3)) % 7 === 3 && Number(row.runId.slice(3)) % 3 === 0,
    ),
  );
});

test('on 30,000 runs in 7 projects a run-list page is an index scan in keyset order of the per-project run indexes [postgres]', async (t) => {
  const db = await database();
  const rows = 30_000;
  // Mostly succeeded; one run in 500 failed: a state filter that only its own index serves well.
  const status = "CASE WHEN g % 500 = 3 THEN 'failed' ELSE 'succeeded' END";
  await db.owner
    .query(`INSERT INTO runs (id, project_id, owner, status, version, next_event_seq, created_at_ms, updated_at_ms)
    SELECT 'yr-' || g, 'yp-' || (g % 7), 'runtime', ${status}, 1, 1, 5000 + g, 5000 + g FROM generate_series(1, ${rows}) AS g`);
  await db.owner.query(`INSERT INTO attempts (run_id, id, status, created_at_ms, updated_at_ms)
    SELECT 'yr-' || g, 'yr-' || g || '-a1', ${status}, 5000 + g, 5000 + g FROM generate_series(1, ${rows}) AS g`);
  await db.owner.query('ANALYZE runs, attempts');

  const runtime = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  t.teardown(() => runtime.end());
  const explain = async (sql: string, params: unknown[]): Promise<PlanNode[]> => {
    const result = await runtime.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
    const plan = (result.rows[0] as { 'QUERY PLAN': Array<{ Plan: PlanNode }> })['QUERY PLAN'][0]?.Plan;
    if (plan === undefined) throw new Error('no plan');
    return nodes(plan);
  };
  const cases: Array<[string, string, unknown[]]> = [
    [MANAGEMENT_SQL.runPageAll, 'runs_by_project', ['yp-3', 10_000_000, '', 21]],
    [MANAGEMENT_SQL.runPageAll, 'runs_by_project', ['yp-3', 20_000, 'yr-15000', 21]],
    [MANAGEMENT_SQL.runPageByStatus, 'runs_by_project_status', ['yp-3', 10_000_000, '', 21, 'failed']],
    [MANAGEMENT_SQL.runPageByStatus, 'runs_by_project_status', ['yp-3', 20_000, 'yr-15000', 21, 'failed']],
  ];
  for (const [sql, index, params] of cases) {
    const plan = await explain(sql, params);
    const scans = plan.filter((node) => node['Relation Name'] === 'runs');
    t.is(scans.length, 1, JSON.stringify(plan));
    const [scan] = scans;
    t.true(['Index Scan', 'Index Only Scan'].includes(scan?.['Node Type'] ?? ''), scan?.['Node Type']);
    t.is(scan?.['Index Name'], index);
    t.regex(scan?.['Index Cond'] ?? '', /project_id = 'yp-3'::text.*ROW\(created_at_ms, id\) < ROW/);
    // The page is the index order itself: Limit directly over the scan, no sort of the project's runs.
    t.deepEqual(
      plan.slice(0, 2).map((node) => node['Relation Name'] ?? node['Node Type']),
      ['Limit', 'runs'],
      JSON.stringify(plan.map((node) => node['Node Type'])),
    );
    t.false(plan.some((node) => node['Node Type'] === 'Seq Scan'));
    t.is(scan?.['Rows Removed by Filter'] ?? 0, 0);
    t.true((scan?.['Actual Rows'] ?? 99) <= 21);
  }
  const page = await runtime.query(MANAGEMENT_SQL.runPageByStatus, ['yp-3', 10_000_000, '', 21, 'failed']);
  // g ≡ 3 (mod 7) and g ≡ 3 (mod 500): g = 3 + 3500k for k = 0..8, newest first.
  t.deepEqual(
    page.rows.map((row: { runId: string }) => row.runId),
    [8, 7, 6, 5, 4, 3, 2, 1, 0].map((k) => `yr-${3 + 3500 * k}`),
  );
  t.true(
    page.rows.every(
      (row: { runId: string; status: string }) => Number(row.runId.slice(3)) % 7 === 3 && row.status === 'failed',
    ),
  );
});

test('gate 15: run_events and management_audit are append-only: the runtime role may INSERT and SELECT them, and UPDATE and DELETE are refused [postgres]', async (t) => {
  const db = await database();
  const runtime = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  runtime.on('error', () => undefined);
  t.teardown(() => runtime.end());
  for (const table of ['run_events', 'management_audit']) {
    await t.notThrowsAsync(runtime.query(`SELECT count(*) FROM ${table}`));
    for (const statement of [
      `UPDATE ${table} SET created_at_ms = created_at_ms`,
      `DELETE FROM ${table}`,
      `TRUNCATE ${table}`,
    ]) {
      const error = await t.throwsAsync(runtime.query(statement));
      t.is((error as { code?: string }).code, '42501', `${statement} is refused for lack of privilege`);
    }
  }
});
