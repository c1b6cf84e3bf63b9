// The PostgreSQL store (design/postgres; design/dispatch §6; design/architecture §5, §7) on a real server: the shared contract
// suite as the runtime role, plus what only PostgreSQL shows — the database clock, migrations and
// readiness from the catalog, CHECKs, the schema dump, bad input and dropped connections.
import test from 'ava';
import { Pool, type PoolClient } from 'pg';

import { PidfenceError } from '../../lib/base/errors';
import { createLeaseToken } from '../../lib/contract/index';
import { loadMigrations, migrationsDirectory } from '../../lib/store/migrations';
import {
  grantRuntime,
  migratePostgres,
  openPostgresStore,
  PostgresDispatchRepository,
  postgresReadiness,
  PostgresRunStore,
} from '../../lib/store/postgres/index';
import { DISPATCH_SQL } from '../../lib/store/postgres/dispatch-statements';
import { provisionDatabase } from '../helpers/postgres';
import { committedSchemaDump, currentSchemaDump, SCHEMA_DUMP_COMMAND } from '../helpers/pg-schema';
import { migratedDatabase, migratedDatabaseForFile, SUITE_SESSION_SETTINGS } from '../helpers/pg-store';
import { openContractStore } from '../helpers/stores';
import { registerDispatchContractSuite } from './dispatch-contract-suite';
import { type ContractStore } from '../helpers/stores';
import { cancelledRun } from '../helpers/cancelled-runs';
import { crashPointAfterDispatchUpdate } from '../helpers/pg-crash-point';
import { tallyWire, wireSince, type WireTally } from '../helpers/wire-tally';

const ready = migratedDatabaseForFile(test, 'pgstore');

/**
 * The suite's leases are 100 ms of real time; with ~20 tests at once on two shared cores a claim
 * can wait longer than that for the CPU. The factory therefore hands out one store at a time: each
 * test still runs unchanged, against the server alone (the races have their own gate 11 tests).
 */
let previous: Promise<void> = Promise.resolve();
async function openExclusive(): Promise<ContractStore> {
  const turn = previous;
  let done: () => void = () => undefined;
  previous = new Promise((resolve) => {
    done = resolve;
  });
  await turn;
  try {
    const store = await openContractStore(await ready, { checkReadiness: false }, SUITE_SESSION_SETTINGS);
    return {
      ...store,
      close: async () => {
        try {
          await store.close();
        } finally {
          done();
        }
      },
    };
  } catch (error) {
    done();
    throw error;
  }
}

registerDispatchContractSuite({ name: 'postgres', open: openExclusive });

// ---------------------------------------------------------------------------------------------
// What only PostgreSQL shows (serial: they run before the suite, so nothing competes with its 100 ms leases)

const TEN_YEARS_MS = Math.round(10 * 365.25 * 24 * 60 * 60 * 1000);

async function serverNowMs(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ ms: string }>('SELECT floor(extract(epoch FROM now()) * 1000)::text AS ms');
  return Number(rows[0]?.ms);
}

async function cancelledAt(store: Pick<ContractStore, 'runStore'>, runId: string): Promise<number> {
  return (await cancelledRun(store.runStore, { runId, running: null })).cancelRequestedAtMs;
}

function claimFor(runId: string, cancelRequestedAtMs: number, leaseDurationMs = 60_000) {
  return {
    runId,
    attemptId: `${runId}-a1`,
    cancelRequestedAtMs,
    owner: 'worker-a',
    token: createLeaseToken(),
    leaseDurationMs,
  };
}

test.serial('gate 11: the database is the only clock: a client clock ten years ahead is ignored', async (t) => {
  const db = await ready;
  const store = await openContractStore(db, { clock: () => Date.now() + TEN_YEARS_MS, checkReadiness: false });
  t.teardown(() => store.close());
  const before = await serverNowMs(db.admin);
  const at = await cancelledAt(store, 'clock-run');
  const claim = claimFor('clock-run', at, 60_000);
  const claimed = await store.repository.claim(claim);
  const afterClaim = await serverNowMs(db.admin);
  if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
  for (const value of [at, claimed.record.updatedAtMs, claimed.record.lastDispatchedAtMs ?? -1]) {
    t.true(value >= before && value <= afterClaim, `${value} within the server's [${before}, ${afterClaim}]`);
  }
  t.is(claimed.record.leaseExpiresAtMs, claimed.record.updatedAtMs + 60_000, 'lease expiry = database time + duration');

  const settled = await store.repository.recordResult({
    runId: claim.runId,
    attemptId: claim.attemptId,
    owner: claim.owner,
    token: claim.token,
    expectedVersion: claimed.record.version,
    result: 'dispatch_error',
    eventId: 'clock-e2',
    retryDelayMs: 30_000,
  });
  const afterSettle = await serverNowMs(db.admin);
  if (settled.kind !== 'recorded') return t.fail(settled.kind);
  t.true(settled.record.updatedAtMs >= afterClaim - 1 && settled.record.updatedAtMs <= afterSettle);
  t.is(settled.record.nextAttemptAtMs, settled.record.updatedAtMs + 30_000, 'retry due = database time + delay');
  t.is(settled.event.createdAtMs, settled.record.updatedAtMs);
  t.true(
    Math.abs(settled.record.updatedAtMs - (Date.now() + TEN_YEARS_MS)) > TEN_YEARS_MS / 2,
    'the injected clock was never read',
  );
  const attempt = await store.runStore.createAttempt({ runId: 'clock-run-2', attemptId: 'x' });
  t.is(attempt.kind, 'run_missing');
});

test.serial('gate 11: blocked_at_ms and attempt deadlines come from the database clock too', async (t) => {
  const db = await ready;
  const store = await openContractStore(db, { clock: () => 0, checkReadiness: false });
  t.teardown(() => store.close());
  const before = await serverNowMs(db.admin);
  await store.runStore.createRun({ runId: 'clock-b', projectId: 'p' });
  const created = await store.runStore.createAttempt({ runId: 'clock-b', attemptId: 'clock-b-a1', timeoutMs: 5_000 });
  if (created.kind !== 'created') return t.fail(created.kind);
  t.is(created.attempt.deadlineAtMs, created.attempt.createdAtMs + 5_000);
  const at = await store.runStore.requestCancellation({ runId: 'clock-b', reason: 'user', eventId: 'clock-b-e1' });
  const claim = claimFor('clock-b', at.kind === 'requested' ? (at.run.cancelRequestedAtMs ?? 0) : 0);
  const claimed = await store.repository.claim(claim);
  if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
  const blocked = await store.repository.recordResult({
    runId: claim.runId,
    attemptId: claim.attemptId,
    owner: claim.owner,
    token: claim.token,
    expectedVersion: claimed.record.version,
    result: 'identity_mismatch',
    eventId: 'clock-b-e2',
  });
  const after = await serverNowMs(db.admin);
  if (blocked.kind !== 'recorded') return t.fail(blocked.kind);
  t.true((blocked.record.blockedAtMs ?? 0) >= before && (blocked.record.blockedAtMs ?? 0) <= after);
  t.true(created.attempt.createdAtMs >= before);
});

test.serial(
  'migrations: owner migrates once, the runtime role is ready, and readiness names each problem from the catalog',
  async (t) => {
    const db = await migratedDatabase('readiness');
    t.teardown(() => db.dispose());
    t.deepEqual(await migratePostgres(db.ownerUrl), [], 'a second migrate applies nothing');
    const files = loadMigrations(migrationsDirectory('postgres'));
    t.deepEqual(
      files.map((file) => file.name),
      [
        '0001_runs_attempts_events',
        '0002_cancellation_dispatches',
        '0003_management_audit',
        '0004_grants',
        '0005_execution_lifecycle',
        '0006_runner_ownership',
        '0007_dispatch_functions',
        '0008_append_only_history',
        '0009_cluster_worker_leases',
        '0010_runs_by_project',
        '0011_pending_at_cancel_due_index',
        '0012_set_based_page_functions',
        '0013_worker_fleet',
        '0014_run_names',
        '0015_single_row_is_a_page_of_one',
        '0016_worker_liveness_and_lease_page',
        '0017_unreachable_runs',
        '0018_project_cancel_in_one_statement',
        '0019_attempt_leftovers',
        '0020_one_cancel_intent_rule',
        '0021_a_pull_is_answered_once',
        '0022_no_cancelled_runs_index',
        '0023_stop_pages_find_dispatches_by_key',
      ],
    );
    const last = files[files.length - 1];
    const recorded = await db.owner.query<{ version: number; checksum: string }>(
      'SELECT version, checksum FROM pidfence_migrations ORDER BY version',
    );
    t.deepEqual(
      recorded.rows.map((row) => row.checksum),
      files.map((file) => file.checksum),
      'sha256 of each file recorded',
    );
    t.deepEqual(await postgresReadiness(db.runtimeUrl), {
      schemaVersion: files.length,
      schema: 'public',
      runtimeRole: db.runtimeRole,
    });
    t.deepEqual(await postgresReadiness(db.ownerUrl, { runtimeRole: db.runtimeRole }), {
      schemaVersion: files.length,
      schema: 'public',
      runtimeRole: db.runtimeRole,
    });

    const expectNotReady = async (code: string, pattern: RegExp, url = db.runtimeUrl): Promise<void> => {
      const error = await t.throwsAsync(postgresReadiness(url), { instanceOf: PidfenceError });
      t.is((error as PidfenceError).code, code);
      t.regex(error?.message ?? '', pattern);
    };
    // The owner's URL where the runtime role's belongs: the advice is the URL, not a grant to the owner (issue 33).
    await expectNotReady(
      'ERR_PIDFENCE_STORE_OWNER',
      /owns the pidfence tables: it is the migration owner.*Connect with the runtime role's URL/,
      db.ownerUrl,
    );
    const asOwner = (await t.throwsAsync(postgresReadiness(db.ownerUrl)))?.message ?? '';
    const ownerRole = asOwner.split(' ')[0] ?? '';
    t.false(
      asOwner.includes('grantRuntime(') || asOwner.includes(`grant-runtime ${ownerRole}`),
      'no grant for the owner is advised',
    );

    await db.owner.query(`REVOKE UPDATE ON cancellation_dispatches FROM ${db.runtimeRole}`);
    await expectNotReady(
      'ERR_PIDFENCE_PG_PRIVILEGE_MISSING',
      new RegExp(
        `lacks UPDATE on cancellation_dispatches; run \`pidfence grant-runtime ${db.runtimeRole} --db <migration-owner-url>\` \\(grantRuntime\\('${db.runtimeRole}'\\) from a program\\)`,
      ),
    );
    await t.throwsAsync(openPostgresStore(db.runtimeUrl), { code: 'ERR_PIDFENCE_PG_PRIVILEGE_MISSING' });
    await grantRuntime(db.ownerUrl, db.runtimeRole);
    await t.notThrowsAsync(postgresReadiness(db.runtimeUrl));

    await db.owner.query(`GRANT DELETE, TRUNCATE ON runs TO ${db.runtimeRole}`);
    await db.owner.query(`GRANT TRIGGER, REFERENCES ON run_events TO ${db.runtimeRole}`);
    await expectNotReady('ERR_PIDFENCE_PG_PRIVILEGE_EXCESS', /DELETE on runs, TRUNCATE on runs/);
    await expectNotReady('ERR_PIDFENCE_PG_PRIVILEGE_EXCESS', /REFERENCES on run_events, TRIGGER on run_events/);
    await grantRuntime(db.ownerUrl, db.runtimeRole);
    await db.owner.query(`GRANT CREATE ON SCHEMA public TO ${db.runtimeRole}`);
    await expectNotReady('ERR_PIDFENCE_PG_PRIVILEGE_EXCESS', /CREATE on schema public/);
    await db.owner.query(`REVOKE CREATE ON SCHEMA public FROM ${db.runtimeRole}`);
    await t.notThrowsAsync(postgresReadiness(db.runtimeUrl));

    await db.owner.query("UPDATE pidfence_migrations SET checksum = 'f00d' || substr(checksum, 5) WHERE version = 2");
    await expectNotReady(
      'ERR_PIDFENCE_MIGRATION_CHECKSUM',
      /0002_cancellation_dispatches was changed after it was applied.*new numbered migration/,
    );
    await t.throwsAsync(migratePostgres(db.ownerUrl), { code: 'ERR_PIDFENCE_MIGRATION_CHECKSUM' });
    await db.owner.query('UPDATE pidfence_migrations SET checksum = $1 WHERE version = 2', [files[1]?.checksum]);
    await db.owner.query('DELETE FROM pidfence_migrations WHERE version = $1', [files.length]);
    await expectNotReady(
      'ERR_PIDFENCE_MIGRATION_PENDING',
      new RegExp(`lacks 1 pidfence migration\\(s\\) \\(first: ${last?.name ?? '-'}\\); run migratePostgres\\(\\)`),
    );
    await db.owner.query(
      "INSERT INTO pidfence_migrations VALUES ($1, $2, $3, 0), ($1::int + 1, '9999_future', 'x', 0)",
      [files.length, last?.name, last?.checksum],
    );
    await expectNotReady('ERR_PIDFENCE_MIGRATION_UNKNOWN', /newer release/);
    await t.throwsAsync(postgresReadiness(db.runtimeUrl, { runtimeRole: 'pidfence_no_such_role' }), {
      code: 'ERR_PIDFENCE_PG_ROLE_MISSING',
    });
  },
);

test.serial('migrations: an unmigrated database is not ready, with a sentence saying what to run', async (t) => {
  const db = await provisionDatabase('unmigrated');
  t.teardown(() => db.drop());
  const error = await t.throwsAsync(postgresReadiness(db.runtimeUrl), { instanceOf: PidfenceError });
  t.is((error as PidfenceError).code, 'ERR_PIDFENCE_MIGRATION_PENDING');
  const count = loadMigrations(migrationsDirectory('postgres')).length;
  t.regex(
    error?.message ?? '',
    new RegExp(
      `lacks ${count} pidfence migration\\(s\\) \\(first: 0001_runs_attempts_events\\); run migratePostgres\\(\\) as the migration owner`,
    ),
  );
  const denied = await t.throwsAsync(migratePostgres(db.runtimeUrl), { instanceOf: PidfenceError });
  t.is((denied as PidfenceError).code, 'ERR_PIDFENCE_STORE_PRIVILEGE', 'the runtime role cannot migrate');
});

test.serial('the committed schema dump matches the migrations', async (t) => {
  const current = await currentSchemaDump();
  const committed = committedSchemaDump();
  if (current !== committed) {
    t.log(
      `test/fixtures/postgres-schema.sql differs from a freshly migrated database: regenerate it with \`${SCHEMA_DUMP_COMMAND}\` and review the diff.`,
    );
  }
  t.is(current, committed, `test/fixtures/postgres-schema.sql is stale: run ${SCHEMA_DUMP_COMMAND}`);
});

test.serial(
  'CHECK constraints hold the status, lease, retry and terminal shape; the composite references hold project and attempt',
  async (t) => {
    const db = await ready;
    const store = await openContractStore(db, { checkReadiness: false });
    t.teardown(() => store.close());
    await cancelledAt(store, 'check-run');
    // The cancel wrote the pending dispatch (docs/decisions/0022); the shapes below are written by hand.
    await db.owner.query(`DELETE FROM cancellation_dispatches WHERE run_id = 'check-run'`);
    await store.runStore.createRun({ runId: 'check-other', projectId: 'project-a' });
    await store.runStore.createAttempt({ runId: 'check-other', attemptId: 'check-other-a1' });
    const insert = (status: string, extra: Record<string, unknown>) => {
      const row = {
        runId: 'check-run',
        projectId: 'project-a',
        attemptId: 'check-run-a1',
        next: null,
        owner: null,
        digest: null,
        expires: null,
        result: null,
        blocked: null,
        status,
        ...extra,
      };
      return db.owner.query(
        `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count,
      next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
      VALUES ($1, $2, $3, $4, 1, 1, $5, $6, $7, $8, $9, NULL, $10, 1, 1)`,
        [
          row.runId,
          row.projectId,
          row.attemptId,
          row.status,
          row.next,
          row.owner,
          row.digest,
          row.expires,
          row.result,
          row.blocked,
        ],
      );
    };
    const digest = 'a'.repeat(64);
    const failsWith = async (write: Promise<unknown>, code: string, why: string) => {
      const error = await t.throwsAsync(write, undefined, why);
      t.is((error as { code?: string } | undefined)?.code, code, why);
    };
    await failsWith(insert('leased', { owner: 'w', expires: 5 }), '23514', 'leased without digest');
    await failsWith(insert('retry_wait', { result: 'dispatch_error' }), '23514', 'retry_wait without due time');
    await failsWith(
      insert('dispatched', { result: 'already_exited', owner: 'w', digest, expires: 5 }),
      '23514',
      'dispatched with a lease',
    );
    await failsWith(insert('blocked', { result: 'invalid' }), '23514', 'blocked without blocked_at_ms');
    await failsWith(
      insert('blocked', { result: 'dispatch_error', blocked: 5 }),
      '23514',
      'blocked by a retryable result',
    );
    await failsWith(
      insert('leased', { owner: 'w', digest: 'A'.repeat(64), expires: 5 }),
      '23514',
      'digest must be lowercase hex',
    );
    await failsWith(
      insert('leased', { owner: 'w', digest, expires: 5, projectId: 'project-b' }),
      '23503',
      'project must match the run',
    );
    await failsWith(
      insert('leased', { owner: 'w', digest, expires: 5, attemptId: 'check-other-a1' }),
      '23503',
      'the attempt must belong to the run',
    );
    await insert('leased', { owner: 'w', digest, expires: 5 });
    t.is((await db.owner.query("SELECT 1 FROM cancellation_dispatches WHERE run_id = 'check-run'")).rowCount, 1);
  },
);

test.serial('gate 9: the due query is bound to its partial indexes', async (t) => {
  const db = await ready;
  const client = await db.owner.connect();
  t.teardown(() => client.release());
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL enable_seqscan = off');
    const plan = (
      await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${DISPATCH_SQL.duePage}`, [-1, '', 64, 'rnr-1'])
    ).rows
      .map((row) => row['QUERY PLAN'])
      .join('\n');
    // docs/decisions/0022: one index on the dispatch table; no branch walks the cancelled runs.
    t.is(plan.match(/cancellation_dispatches_due/g)?.length, 3, plan);
    const lines = plan.split('\n');
    const runScans = lines.flatMap((line, i) => (/ on runs r/.test(line) ? [lines[i + 1] ?? ''] : []));
    t.is(runScans.length, 3, plan);
    for (const next of runScans) t.regex(next, /Index Cond: \(id = /, 'runs are read by key, never walked');
  } finally {
    await client.query('ROLLBACK');
  }
});

test.serial(
  "the single cancel is one call of the project cancel's intent rule in its own transaction: BEGIN, one statement, COMMIT (docs/decisions/0340)",
  async (t) => {
    const db = await ready;
    const pool = new Pool({ connectionString: db.runtimeUrl, max: 1 });
    t.teardown(() => pool.end());
    const wire = tallyWire(pool);
    const runStore = new PostgresRunStore(pool);
    const runId = `wire-cancel-${createLeaseToken().slice(0, 12)}`;
    await runStore.createRun({ runId, projectId: 'p-wire' });
    await runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
    const cancel = async (): Promise<{ kind: string; wire: WireTally }> => {
      const before = { ...wire };
      const outcome = await runStore.requestCancellation({
        runId,
        reason: 'user',
        eventId: `evt-${runId}-${wire.roundTrips}`,
      });
      return { kind: outcome.kind, wire: wireSince(before, wire) };
    };
    const oneCall = { roundTrips: 3, statements: 1, transactionControl: 5 };
    t.deepEqual(await cancel(), { kind: 'requested', wire: oneCall });
    t.deepEqual(await cancel(), { kind: 'already_requested', wire: oneCall });
  },
);

test.serial('bad input never reaches SQL: no connection is checked out and no query runs', async (t) => {
  const db = await ready;
  const pool = new Pool({ connectionString: db.runtimeUrl, max: 2 });
  t.teardown(() => pool.end());
  let calls = 0;
  const connect = pool.connect.bind(pool) as () => Promise<PoolClient>;
  const query = pool.query.bind(pool);
  pool.connect = (async () => {
    calls += 1;
    return connect();
  }) as typeof pool.connect;
  pool.query = ((...args: Parameters<typeof query>) => {
    calls += 1;
    return query(...args);
  }) as typeof pool.query;
  const repository = new PostgresDispatchRepository(pool);
  const runStore = new PostgresRunStore(pool);
  const claim = claimFor('bad-run', 1);
  const bad: ReadonlyArray<() => Promise<unknown>> = [
    () => repository.claim({ ...claim, leaseDurationMs: 1 }),
    () => repository.claim({ ...claim, owner: '' }),
    () => repository.claim({ ...claim, extra: 1 } as never),
    () => repository.claim({ ...claim, cancelRequestedAtMs: '1' } as never),
    () => repository.recordResult({ ...claim, expectedVersion: 1, result: 'nope', eventId: 'e' } as never),
    () =>
      repository.recordResult({
        runId: 'r',
        attemptId: 'a',
        owner: 'w',
        token: claim.token,
        expectedVersion: 1,
        result: 'dispatch_error',
        eventId: 'e',
      }),
    () => repository.duePage({ limit: 65 }),
    () => repository.getRecord("r'; DROP TABLE runs; --"),
    () => runStore.requestCancellation({ runId: 'r', reason: 'x', eventId: 'e' } as never),
    () => runStore.createAttempt({ runId: 'r', attemptId: 'a', timeoutMs: -1 }),
    () => runStore.listEvents('r', { limit: 10_000 }),
  ];
  for (const attempt of bad) {
    const error = await t.throwsAsync(attempt());
    t.regex((error as { code?: string }).code ?? '', /^ERR_PIDFENCE_INVALID_/);
  }
  t.is(calls, 0, 'no connection checked out, no query sent');
  await repository.getRecord('bad-run');
  t.true(calls > 0, 'the counter sees real calls');
});

test.serial(
  'a connection dropped inside pidfence_record_result, after its dispatch UPDATE, leaves nothing behind',
  async (t) => {
    const db = await ready;
    const store = await openContractStore(db, { checkReadiness: false });
    t.teardown(() => store.close());
    const at = await cancelledAt(store, 'drop-run');
    const claim = claimFor('drop-run', at);
    const claimed = await store.repository.claim(claim);
    if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
    const before = {
      run: await store.runStore.getRun('drop-run'),
      record: await store.repository.getRecord('drop-run'),
      events: await store.runStore.listEvents('drop-run'),
    };
    const command = {
      runId: claim.runId,
      attemptId: claim.attemptId,
      owner: claim.owner,
      token: claim.token,
      expectedVersion: claimed.record.version,
      result: 'termination_requested' as const,
      eventId: 'drop-e2',
    };
    const crashPoint = await crashPointAfterDispatchUpdate(db.admin, 'drop-run');
    t.teardown(() => crashPoint.remove());
    const settling = store.repository.recordResult(command);
    settling.catch(() => undefined);
    const parked = await crashPoint.parked();
    t.regex(parked.query, /pidfence_record_result\(/, 'the parked statement is the function production calls');
    const { rows } = await db.admin.query<{ done: boolean }>('SELECT pg_terminate_backend($1) AS done', [
      parked.processId,
    ]);
    t.true(rows[0]?.done, 'the backend was terminated after the dispatch update');
    const error = await t.throwsAsync(settling, { instanceOf: PidfenceError });
    // One statement is its own transaction: a socket lost after it was sent may have committed, so the
    // caller is told COMMIT_UNKNOWN (re-read, the fences make a retry safe), never "nothing was written".
    t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN');
    for (const secret of [
      claim.token,
      claim.owner,
      'drop-run',
      'UPDATE',
      'cancellation_dispatches',
      claimed.record.leaseTokenDigest ?? '-',
    ]) {
      t.false(error?.message.includes(secret), `the error does not carry ${secret.slice(0, 12)}`);
    }
    await crashPoint.remove();
    const after = {
      run: await store.runStore.getRun('drop-run'),
      record: await store.repository.getRecord('drop-run'),
      events: await store.runStore.listEvents('drop-run'),
    };
    t.deepEqual(after, before, 'dispatch, run version and events are as before the transaction');
    const recorded = await store.repository.recordResult(command);
    t.is(recorded.kind, 'recorded', 'the same fence settles once the connection is back');
  },
);

test.serial(
  'a connection dropped inside pidfence_record_results (a page settle), after a dispatch UPDATE, leaves the whole page unsettled',
  async (t) => {
    const db = await ready;
    const store = await openContractStore(db, { checkReadiness: false });
    t.teardown(() => store.close());
    const runIds = ['drop-page-a', 'drop-page-b'];
    const commands = [];
    const before = [];
    for (const runId of runIds) {
      const claim = claimFor(runId, await cancelledAt(store, runId));
      const claimed = await store.repository.claim(claim);
      if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
      commands.push({
        runId,
        attemptId: claim.attemptId,
        owner: claim.owner,
        token: claim.token,
        expectedVersion: claimed.record.version,
        result: 'already_exited' as const,
        eventId: `${runId}-e2`,
      });
      before.push({
        run: await store.runStore.getRun(runId),
        record: await store.repository.getRecord(runId),
        events: await store.runStore.listEvents(runId),
      });
    }
    // The second run of the page parks: the first one's UPDATE is already done in the same transaction.
    const crashPoint = await crashPointAfterDispatchUpdate(db.admin, 'drop-page-b');
    t.teardown(() => crashPoint.remove());
    const settling = store.repository.recordResults(commands);
    settling.catch(() => undefined);
    const parked = await crashPoint.parked();
    t.regex(
      parked.query,
      /pidfence_record_results\(/,
      'the parked statement is the set-based function production calls',
    );
    await db.admin.query('SELECT pg_terminate_backend($1)', [parked.processId]);
    const error = await t.throwsAsync(settling, { instanceOf: PidfenceError });
    t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN');
    await crashPoint.remove();
    const after = [];
    for (const runId of runIds)
      after.push({
        run: await store.runStore.getRun(runId),
        record: await store.repository.getRecord(runId),
        events: await store.runStore.listEvents(runId),
      });
    t.deepEqual(after, before, 'neither dispatch, run version nor event of the page changed');
    const recorded = await store.repository.recordResults(commands);
    t.deepEqual(
      recorded.map((r) => r.kind),
      ['recorded', 'recorded'],
      'the same fences settle once the connection is back',
    );
  },
);

/** Counts ReadyForQuery (one per round trip) and CommandComplete (one per top-level statement) on the wire. */
function wireCountingPool(url: string): { pool: Pool; counts: { roundTrips: number; statements: number } } {
  const counts = { roundTrips: 0, statements: 0 };
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
  return { pool, counts };
}

test.serial(
  'claim and recordResult are one round trip and one statement each on the wire, with and without named prepared statements (docs/decisions/0021)',
  async (t) => {
    const db = await ready;
    const setup = await openContractStore(db, { checkReadiness: false });
    t.teardown(() => setup.close());
    for (const preparedStatements of [true, false]) {
      const runId = `wire-run-${String(preparedStatements)}`;
      const at = await cancelledAt(setup, runId);
      const { pool, counts } = wireCountingPool(db.runtimeUrl);
      t.teardown(() => pool.end());
      const repository = new PostgresDispatchRepository(pool, { preparedStatements });
      // A read through the store first: a connection's first use also checks its synchronous_commit,
      // once per connection (docs/decisions/0010); what is counted below is every later call.
      await repository.getRecord(runId);
      for (let round = 0; round < 2; round += 1) {
        // Round 2 proves the second call on a connection (the prepared one, when named) is one trip too.
        const claim = claimFor(runId, at);
        const before = { ...counts };
        const claimed = await repository.claim(claim);
        t.is(claimed.kind, 'claimed');
        if (claimed.kind !== 'claimed') return;
        t.deepEqual(
          { roundTrips: counts.roundTrips - before.roundTrips, statements: counts.statements - before.statements },
          { roundTrips: 1, statements: 1 },
          `claim ${round}, prepared ${String(preparedStatements)}`,
        );
        const mid = { ...counts };
        const recorded = await repository.recordResult({
          runId,
          attemptId: claim.attemptId,
          owner: claim.owner,
          token: claim.token,
          expectedVersion: claimed.record.version,
          result: 'dispatch_error',
          retryDelayMs: 10,
          eventId: `${runId}-r${round}`,
        });
        t.is(recorded.kind, 'recorded');
        await new Promise((resolve) => setTimeout(resolve, 50));
        t.deepEqual(
          { roundTrips: counts.roundTrips - mid.roundTrips, statements: counts.statements - mid.statements },
          { roundTrips: 1, statements: 1 },
          `settle ${round}, prepared ${String(preparedStatements)}`,
        );
      }
      const events = await setup.runStore.listEvents(runId);
      t.deepEqual(
        events.map((event) => event.type),
        ['run.cancel_requested', 'run.cancel_dispatch_failed', 'run.cancel_dispatch_failed'],
      );
    }
  },
);

test.serial(
  'claimDuePage passes over a run another transaction holds instead of waiting, and two racing supervisors claim each due run exactly once (docs/decisions/0025)',
  async (t) => {
    const db = await ready;
    const [one, two] = [
      await openContractStore(db, { checkReadiness: false }),
      await openContractStore(db, { checkReadiness: false }),
    ];
    t.teardown(async () => {
      await one.close();
      await two.close();
    });
    const runnerId = `rnr-due-${process.pid}`;
    await one.runnerStore.registerRunner({ runnerId, hostId: 'host-due', kind: 'run', identity: '{}' });
    const runs = [];
    for (let i = 0; i < 4; i += 1)
      runs.push(await cancelledRun(one.runStore, { runId: `due-skip-${process.pid}-${i}`, runnerId }));
    const lockedRun = runs[1]?.runId ?? '';
    const holder = await db.owner.connect();
    t.teardown(() => holder.release());
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [lockedRun]);
    const before = await one.repository.getRecord(lockedRun);
    const tokens = runs.map(() => createLeaseToken());
    // Waiting on the held row would end in ERR_PIDFENCE_STORE_LOCK_TIMEOUT after the lock timeout.
    const page = await one.repository.claimDuePage({ owner: 'worker-a', leaseDurationMs: 60_000, tokens, runnerId });
    t.deepEqual(
      page.items.map((entry) => [entry.item.runId, entry.outcome.kind]),
      runs.map((run, i) => [run.runId, i === 1 ? 'passed_over' : 'claimed']),
    );
    const third = page.items[2]?.outcome;
    t.is(
      third?.kind === 'claimed' ? third.token : undefined,
      tokens[2],
      'the items after a passed-over one keep the token of their position',
    );
    t.deepEqual(await one.repository.getRecord(lockedRun), before, 'a passed-over run is not touched');
    await holder.query('ROLLBACK');
    const later = await one.repository.claimDuePage({
      owner: 'worker-a',
      leaseDurationMs: 60_000,
      tokens: [createLeaseToken()],
      runnerId,
    });
    t.deepEqual(
      later.items.map((entry) => [entry.item.runId, entry.outcome.kind]),
      [[lockedRun, 'claimed']],
      'the next page takes it once it is free',
    );

    for (let round = 0; round < 10; round += 1) {
      const raceRunner = `rnr-race-${process.pid}-${round}`;
      await one.runnerStore.registerRunner({ runnerId: raceRunner, hostId: 'host-due', kind: 'run', identity: '{}' });
      const raced: string[] = [];
      for (let i = 0; i < 6; i += 1)
        raced.push(
          (await cancelledRun(one.runStore, { runId: `due-race-${process.pid}-${round}-${i}`, runnerId: raceRunner }))
            .runId,
        );
      const claimAll = (store: typeof one, owner: string) =>
        store.repository.claimDuePage({
          owner,
          leaseDurationMs: 60_000,
          tokens: raced.map(() => createLeaseToken()),
          runnerId: raceRunner,
        });
      const pages = await Promise.all([claimAll(one, 'worker-a'), claimAll(two, 'worker-b')]);
      const winners = pages.flatMap((result) =>
        result.items.filter((entry) => entry.outcome.kind === 'claimed').map((entry) => entry.item.runId),
      );
      t.deepEqual([...winners].sort(), [...raced].sort(), `round ${round}: every due run claimed exactly once`);
      for (const runId of raced) t.is((await one.repository.getRecord(runId))?.dispatchCount, 1);
    }
  },
);

test.serial(
  'pg gate 11: the runtime role gains only EXECUTE on the dispatch functions; they run with its own privileges and PUBLIC cannot call them',
  async (t) => {
    const db = await ready;
    const { rows } = await db.admin.query<{
      name: string;
      definer: boolean;
      public_execute: boolean;
      runtime_execute: boolean;
    }>(
      `
    SELECT p.proname AS name, p.prosecdef AS definer,
           EXISTS (SELECT 1 FROM aclexplode(p.proacl) AS acl WHERE acl.grantee = 0) AS public_execute,
           has_function_privilege($1, p.oid, 'EXECUTE') AS runtime_execute
      FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
     WHERE n.nspname = current_schema() AND p.proname LIKE 'pidfence\\_%' ORDER BY p.proname`,
      [db.runtimeRole],
    );
    t.deepEqual(
      rows.map((row) => row.name),
      [
        'pidfence_cancel_project',
        'pidfence_claim',
        'pidfence_claim_due_page',
        'pidfence_claim_page',
        'pidfence_dispatch_json',
        'pidfence_end_queued_cancels',
        'pidfence_insert_pending_dispatches',
        'pidfence_lapsed_leases',
        'pidfence_lease_tick',
        'pidfence_lock_page',
        'pidfence_notify_cancel',
        'pidfence_record_result',
        'pidfence_record_results',
        'pidfence_request_cancel',
        'pidfence_set_limits',
        'pidfence_write_cancel_intents',
      ],
    );
    for (const row of rows) {
      t.false(row.definer, `${row.name} is SECURITY INVOKER`);
      t.false(row.public_execute, `PUBLIC has no EXECUTE on ${row.name}`);
      // The cancel trigger's function (docs/decisions/0201) fires on the runtime role's cancels without EXECUTE: nobody calls it.
      t.is(
        row.runtime_execute,
        row.name !== 'pidfence_notify_cancel',
        `the runtime role may execute ${row.name} only if it calls it`,
      );
    }
  },
);

test.serial('errors carry a code and advice, never SQL text or parameters', async (t) => {
  const db = await ready;
  const store = await openContractStore(db, { checkReadiness: false });
  t.teardown(() => store.close());
  const at = await cancelledAt(store, 'err-run');
  const claim = claimFor('err-run', at);
  const claimed = await store.repository.claim(claim);
  if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
  const restore = await store.injectEventAppendFailure();
  const error = await t.throwsAsync(
    store.repository.recordResult({
      runId: claim.runId,
      attemptId: claim.attemptId,
      owner: claim.owner,
      token: claim.token,
      expectedVersion: claimed.record.version,
      result: 'already_exited',
      eventId: 'err-e2',
    }),
    { instanceOf: PidfenceError },
  );
  await restore();
  t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_FAILED');
  t.is((error as PidfenceError).errno, 'P0001');
  for (const leak of ['INSERT', 'run_events', 'injected', 'err-run', 'err-e2', claim.token, claim.owner]) {
    t.false(error?.message.includes(leak), `no "${leak.slice(0, 12)}" in the message`);
  }
});

test.serial("close() ends a pool the store made and leaves a caller's pool open", async (t) => {
  const db = await ready;
  const callerPool = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  t.teardown(() => callerPool.end());
  const onCallerPool = await openPostgresStore(callerPool);
  await onCallerPool.close();
  t.is((await callerPool.query('SELECT 1 AS one')).rows[0]?.one, 1, "the caller's pool still works");

  const owned = await openPostgresStore(db.runtimeUrl);
  await owned.dispatchRepository.getRecord('x');
  await owned.close();
  const error = await t.throwsAsync(owned.dispatchRepository.getRecord('x'), { instanceOf: PidfenceError });
  t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_UNAVAILABLE');
});
