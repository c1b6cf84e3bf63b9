// The management suite (design/dispatch §6 gates 14-18) on a real SQLite file with an injected clock, plus
// what only SQLite shows here: a corrupted row makes the summary an error, not a number.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import { ManagementPlane } from '../../lib/management/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { registerManagementSuite, settledRun, type ManagementWorld } from './management-suite';
import { driverOf } from '../../lib/store/sqlite/driver';

let auditInjections = 0;
const DATA_STATEMENT = /^\s*(?!BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)/i;

async function openWorld(): Promise<ManagementWorld & { database: ReturnType<typeof openSqliteStore>['database'] }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-management-'));
  let now = 1_700_000_000_000;
  let recording: string[] | undefined;
  const store = openSqliteStore(path.join(dir, 'pidfence.db'), {
    clock: () => now,
    verbose: (sql) => recording?.push(sql),
  });
  return {
    database: store.database,
    runStore: store.runStore,
    repository: store.dispatchRepository,
    executionStore: store.executionStore,
    management: store.managementStore,
    grants: store.managementStore,
    advanceTime: async (ms) => {
      now += ms;
    },
    statementsOf: async (work) => {
      recording = [];
      try {
        const result = await work();
        return { result, statements: recording.filter((sql) => DATA_STATEMENT.test(sql)) };
      } finally {
        recording = undefined;
      }
    },
    auditRows: async (runId) =>
      driverOf(store.database)
        .prepare(
          'SELECT actor, expected_version AS expectedVersion, expected_result AS expectedResult FROM management_audit WHERE run_id = ? ORDER BY created_at_ms, id',
        )
        .all(runId) as Array<{ actor: string; expectedVersion: number; expectedResult: string }>,
    injectAuditFailure: async (actor) => {
      const trigger = `inject_audit_failure_${auditInjections++}`;
      driverOf(store.database).exec(
        `CREATE TRIGGER ${trigger} BEFORE INSERT ON management_audit WHEN NEW.actor = '${actor}' BEGIN SELECT RAISE(ABORT, 'injected audit failure'); END`,
      );
      return async () => {
        driverOf(store.database).exec(`DROP TRIGGER ${trigger}`);
      };
    },
    close: async () => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

registerManagementSuite({ name: 'sqlite', open: openWorld });

test('gate 16: a blocked row whose result is not a blocking one makes the summary an error, not a number [sqlite]', async (t) => {
  const world = await openWorld();
  t.teardown(() => world.close());
  await world.grants.writeGrant({ subject: 'viewer', projectId: 'p-corrupt', permission: 'run.read' }, 'owner');
  const { runId } = await settledRun(world, 'p-corrupt', 'invalid');
  const plane = new ManagementPlane({ store: world.management, principal: 'viewer' });
  t.like(await plane.summary('p-corrupt'), {
    assessment: 'attention_required',
    states: { blocked: 1 },
    blockingResults: { invalid: 1 },
  });
  // Written outside pidfence, past the CHECK constraints: the kind of row the cross-check exists for.
  driverOf(world.database).pragma('ignore_check_constraints = ON');
  driverOf(world.database)
    .prepare("UPDATE cancellation_dispatches SET last_result = 'dispatch_error' WHERE run_id = ?")
    .run(runId);
  driverOf(world.database).pragma('ignore_check_constraints = OFF');
  const error = await t.throwsAsync(plane.summary('p-corrupt'));
  t.is((error as PidfenceError).code, 'ERR_PIDFENCE_SUMMARY_INCONSISTENT');
  t.regex(error?.message ?? '', /blocking results add up to 0, not blocked 1/);
});

test('the blocked page statement is bound to the per-project partial index (INDEXED BY) [sqlite]', async (t) => {
  const world = await openWorld();
  t.teardown(() => world.close());
  const { MANAGEMENT_SQL } = await import('../../lib/store/sqlite/management-statements');
  const plan = driverOf(world.database)
    .prepare(`EXPLAIN QUERY PLAN ${MANAGEMENT_SQL.blockedPage}`)
    .all({ projectId: 'p', asOfMs: 1, afterAtMs: -1, afterRunId: '', limit: 17 }) as Array<{ detail: string }>;
  t.true(
    plan.some((row) => /USING (COVERING )?INDEX cancellation_dispatches_blocked \(project_id=\? AND /.test(row.detail)),
    JSON.stringify(plan),
  );
  t.false(plan.some((row) => /^SCAN cancellation_dispatches\b(?! USING)/.test(row.detail)));
});

test('the run list statements are bound to the per-project run indexes and read pages in index order; the running count reads only active attempts [sqlite]', async (t) => {
  const world = await openWorld();
  t.teardown(() => world.close());
  const { MANAGEMENT_SQL } = await import('../../lib/store/sqlite/management-statements');
  const planOf = (sql: string, params: Record<string, unknown>): string[] =>
    (driverOf(world.database).prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>).map(
      (row) => row.detail,
    );
  const page = { projectId: 'p', beforeAtMs: 1, beforeRunId: '', limit: 21 };
  const all = planOf(MANAGEMENT_SQL.runPageAll, page);
  t.regex(
    all[0] ?? '',
    /^SEARCH r USING (COVERING )?INDEX runs_by_project \(project_id=\? AND \(created_at_ms,id\)<\(\?,\?\)\)$/,
    all.join('; '),
  );
  const byStatus = planOf(MANAGEMENT_SQL.runPageByStatus, { ...page, status: 'failed' });
  t.regex(
    byStatus[0] ?? '',
    /^SEARCH r USING (COVERING )?INDEX runs_by_project_status \(project_id=\? AND status=\? AND \(created_at_ms,id\)<\(\?,\?\)\)$/,
    byStatus.join('; '),
  );
  // The only sorts are inside the per-run subqueries (one run's attempts: its latest attempt's end
  // and containment), never over the page.
  for (const plan of [all, byStatus])
    t.is(plan.filter((detail) => /TEMP B-TREE/.test(detail)).length, 2, plan.join('; '));
  const summary = planOf(MANAGEMENT_SQL.summary, { subject: 'viewer', projectId: 'p', overdueAfterMs: 1, nowMs: 1 });
  t.true(
    summary.some((detail) => /^SCAN attempts USING (COVERING )?INDEX attempts_one_active$/.test(detail)),
    summary.join('; '),
  );
  t.false(
    summary.some((detail) => /runs_by_project/.test(detail)),
    "the running count never walks the project's run history",
  );
});
