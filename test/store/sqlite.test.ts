// The SQLite store (design/dispatch §2.2, §6; design/architecture §5, §7) on real files: the shared contract suite plus
// what only a file can show — two racing processes, restart, WAL bytes, schema CHECKs and readiness.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

import test from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import { createLeaseToken } from '../../lib/contract/index';
import { loadMigrations, migrationsDirectory, pendingMigrations } from '../../lib/store/migrations';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import { SQL } from '../../lib/store/sqlite/prepared';
import { registerDispatchContractSuite, registerRawTokenScan } from './dispatch-contract-suite';
import { sqliteFileBytes, storeFactory } from '../helpers/stores';
import { tempFile } from '../helpers/temp-file';
import { cancelledRun } from '../helpers/cancelled-runs';
import { driverOf } from '../../lib/store/sqlite/driver';

registerDispatchContractSuite(storeFactory('sqlite'));
registerRawTokenScan(storeFactory('sqlite'));

async function cancelledAt(store: Pick<SqliteStore, 'runStore'>, runId: string): Promise<number> {
  return (await cancelledRun(store.runStore, { runId, running: null })).cancelRequestedAtMs;
}

test('gate 1: two processes racing claim on one SQLite file for 200 rounds get exactly one winner each round', async (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  const store = openSqliteStore(file);
  const rounds: Array<[string, number]> = [];
  for (let i = 0; i < 200; i += 1) rounds.push([`race-${i}`, await cancelledAt(store, `race-${i}`)]);
  store.close();

  const racer = path.resolve(__dirname, '../helpers/claim-racer-child.js');
  const children = ['owner-a', 'owner-b'].map((owner) =>
    spawn(process.execPath, [racer, file, owner], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const readers = children.map((child) => createInterface({ input: child.stdout })[Symbol.asyncIterator]());
  for (const reader of readers) t.is((await reader.next()).value, 'ready');

  const winsPerRound: number[] = [];
  for (const [runId, at] of rounds) {
    for (const child of children) child.stdin.write(`${runId} ${runId}-a1 ${at}\n`);
    const answers = await Promise.all(readers.map(async (reader) => String((await reader.next()).value)));
    t.deepEqual(
      answers.map((answer) => answer.split(' ')[0]),
      [runId, runId],
    );
    const kinds = answers.map((answer) => answer.split(' ')[1]).sort();
    winsPerRound.push(kinds.filter((kind) => kind === 'claimed').length);
    t.deepEqual(kinds, ['claimed', 'leased'], `round ${runId}`);
  }
  for (const child of children) child.stdin.end();
  await Promise.all(children.map((child) => new Promise((resolve) => child.once('exit', resolve))));
  t.is(winsPerRound.length, 200);
  t.true(winsPerRound.every((wins) => wins === 1));

  const check = openSqliteStore(file);
  t.teardown(() => check.close());
  const owners = driverOf(check.database)
    .prepare(
      "SELECT lease_owner AS owner, count(*) AS n FROM cancellation_dispatches WHERE status = 'leased' GROUP BY lease_owner",
    )
    .all() as Array<{ owner: string; n: number }>;
  t.is(
    owners.reduce((sum, row) => sum + row.n, 0),
    200,
  );
  t.log(`wins: ${owners.map((row) => `${row.owner}=${row.n}`).join(', ')}`);
});

test('gate 5: backoff survives closing and reopening the database', async (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  let now = 1_700_000_000_000;
  const first = openSqliteStore(file, { clock: () => now });
  const at = await cancelledAt(first, 'run-restart');
  const token = createLeaseToken();
  const claim = {
    runId: 'run-restart',
    attemptId: 'run-restart-a1',
    cancelRequestedAtMs: at,
    owner: 'w',
    token,
    leaseDurationMs: 1_000,
  };
  const outcome = await first.dispatchRepository.claim(claim);
  if (outcome.kind !== 'claimed') return t.fail(outcome.kind);
  await first.dispatchRepository.recordResult({
    runId: claim.runId,
    attemptId: claim.attemptId,
    owner: 'w',
    token,
    expectedVersion: outcome.record.version,
    result: 'dispatch_error',
    eventId: 'e2',
    retryDelayMs: 30_000,
  });
  first.close();

  now += 29_999;
  const second = openSqliteStore(file, { clock: () => now });
  t.teardown(() => second.close());
  t.deepEqual(await second.dispatchRepository.claim({ ...claim, token: createLeaseToken() }), { kind: 'not_due' });
  now += 1;
  const again = await second.dispatchRepository.claim({ ...claim, token: createLeaseToken() });
  t.is(again.kind, 'claimed');
  t.is(again.kind === 'claimed' ? again.record.dispatchCount : 0, 2);
});

test('bad input runs no SQL at all: the statement log stays empty and the file bytes are unchanged', async (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  const statements: string[] = [];
  const store = openSqliteStore(file, { verbose: (sql) => statements.push(sql) });
  t.teardown(() => store.close());
  const at = await cancelledAt(store, 'run-bad');
  driverOf(store.database).pragma('wal_checkpoint(TRUNCATE)');
  const before = sqliteFileBytes(file);
  statements.length = 0;
  const claim = {
    runId: 'run-bad',
    attemptId: 'run-bad-a1',
    cancelRequestedAtMs: at,
    owner: 'w',
    token: createLeaseToken(),
    leaseDurationMs: 1_000,
  };
  for (const bad of [
    { ...claim, leaseDurationMs: 1 },
    { ...claim, owner: '' },
    { ...claim, extra: 1 },
    { ...claim, cancelRequestedAtMs: '1' },
  ]) {
    const error = await t.throwsAsync(store.dispatchRepository.claim(bad as never));
    t.regex((error as PidfenceError).code, /^ERR_PIDFENCE_INVALID_/);
  }
  await t.throwsAsync(
    store.dispatchRepository.recordResult({ ...claim, expectedVersion: 1, result: 'nope', eventId: 'e' } as never),
  );
  await t.throwsAsync(store.runStore.requestCancellation({ runId: 'run-bad', reason: 'x', eventId: 'e' } as never));
  t.deepEqual(statements, [], 'no statement reached SQLite');
  t.true(sqliteFileBytes(file).equals(before), 'database file and WAL are byte-for-byte unchanged');
});

test('a changed applied migration makes readiness fail with a clear error', (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  openSqliteStore(file).close();
  const reopened = openSqliteStore(file);
  driverOf(reopened.database)
    .prepare("UPDATE pidfence_migrations SET checksum = 'f00d' || substr(checksum, 5) WHERE version = 2")
    .run();
  reopened.close();
  const error = t.throws(() => openSqliteStore(file), { instanceOf: PidfenceError });
  t.is((error as PidfenceError).code, 'ERR_PIDFENCE_MIGRATION_CHECKSUM');
  t.regex(
    error?.message ?? '',
    /0002_cancellation_dispatches was changed after it was applied.*new numbered migration/,
  );

  const files = loadMigrations(migrationsDirectory('sqlite'));
  t.deepEqual(
    files.map((f) => f.version),
    files.map((_, index) => index + 1),
  );
  t.true(files.length >= 4);
  const edited = files.map((f) => (f.version === 1 ? { ...f, checksum: '0'.repeat(64) } : f));
  t.throws(() => pendingMigrations(files, edited), { message: /0001_runs_attempts_events was changed/ });
  t.throws(
    () => pendingMigrations([...files, { version: files.length + 1, name: '9999_future', checksum: 'x' }], files),
    { message: /newer release/ },
  );
  t.deepEqual(
    pendingMigrations(files.slice(0, 1), files).map((f) => f.version),
    files.slice(1).map((f) => f.version),
  );
});

test('CHECK constraints hold the status, lease, retry and terminal shape; project_id must match the run', async (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  const store = openSqliteStore(file);
  t.teardown(() => store.close());
  await cancelledAt(store, 'run-check');
  // The cancel wrote the pending dispatch (docs/decisions/0022); the shapes below are written by hand.
  driverOf(store.database).prepare(`DELETE FROM cancellation_dispatches WHERE run_id = 'run-check'`).run();
  const insert = (status: string, extra: Record<string, unknown>) => () =>
    driverOf(store.database)
      .prepare(
        `INSERT INTO cancellation_dispatches
    (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms, lease_owner, lease_token_digest,
     lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (:runId, :projectId, 'run-check-a1', :status, 1, 1, :next, :owner, :digest, :expires, :result, NULL, :blocked, 1, 1)`,
      )
      .run({
        runId: 'run-check',
        projectId: 'project-a',
        next: null,
        owner: null,
        digest: null,
        expires: null,
        result: null,
        blocked: null,
        status,
        ...extra,
      });
  const digest = 'a'.repeat(64);
  /** better-sqlite3's SqliteError is not an Error in ava's eyes, so read its code directly. */
  const failsWith = (write: () => unknown, code: string, why: string) => {
    try {
      write();
      t.fail(`${why}: the write was accepted`);
    } catch (error) {
      t.is((error as { code?: string }).code, code, why);
    }
  };
  failsWith(insert('leased', { owner: 'w', expires: 5 }), 'SQLITE_CONSTRAINT_CHECK', 'leased without digest');
  failsWith(
    insert('retry_wait', { result: 'dispatch_error' }),
    'SQLITE_CONSTRAINT_CHECK',
    'retry_wait without due time',
  );
  failsWith(
    insert('dispatched', { result: 'already_exited', owner: 'w', digest, expires: 5 }),
    'SQLITE_CONSTRAINT_CHECK',
    'dispatched with a lease',
  );
  failsWith(insert('blocked', { result: 'invalid' }), 'SQLITE_CONSTRAINT_CHECK', 'blocked without blocked_at_ms');
  failsWith(
    insert('blocked', { result: 'dispatch_error', blocked: 5 }),
    'SQLITE_CONSTRAINT_CHECK',
    'blocked by a retryable result',
  );
  failsWith(
    insert('leased', { owner: 'w', digest: 'A'.repeat(64), expires: 5 }),
    'SQLITE_CONSTRAINT_CHECK',
    'digest must be lowercase hex',
  );
  failsWith(
    insert('leased', { owner: 'w', digest, expires: 5, projectId: 'project-b' }),
    'SQLITE_CONSTRAINT_FOREIGNKEY',
    'project must match the run',
  );
  insert('leased', { owner: 'w', digest, expires: 5 })();
  t.is(
    (driverOf(store.database).prepare('SELECT count(*) AS n FROM cancellation_dispatches').get() as { n: number }).n,
    1,
  );
});

test('gate 9: the due query is bound to its indexes (no table scan)', (t) => {
  const { file, cleanup } = tempFile('pidfence-sqlite-');
  t.teardown(cleanup);
  const store = openSqliteStore(file);
  t.teardown(() => store.close());
  // Every runner's due items, and one runner's (docs/decisions/0070): the same index-bound plan.
  for (const runnerId of [null, 'rnr-1']) {
    const plan = (
      driverOf(store.database)
        .prepare(`EXPLAIN QUERY PLAN ${SQL.duePage}`)
        .all({ afterAtMs: -1, afterRunId: '', nowMs: 0, limit: 64, runnerId }) as Array<{ detail: string }>
    ).map((row) => row.detail);
    // docs/decisions/0022: one index on the dispatch table; no branch walks the cancelled runs.
    t.is(plan.filter((line) => line.includes('USING INDEX cancellation_dispatches_due')).length, 3, plan.join('\n'));
    t.false(
      plan.some((line) => line.includes('runs_cancel_open')),
      plan.join('\n'),
    );
    t.false(
      plan.some((line) => /^SCAN (r|d|a)\b/.test(line)),
      plan.join('\n'),
    );
  }
});
