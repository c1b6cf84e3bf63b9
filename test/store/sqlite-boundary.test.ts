// The SQLite store boundary (design/architecture §6-7): every read and write of the five SQLite classes
// answers a broken database with the store's typed error, and rows become records only through the
// contract's validators. Real files, real better-sqlite3; the damage is done the way it happens.
import test, { type ExecutionContext } from 'ava';
import Database from 'better-sqlite3';

import { PidfenceError } from '../../lib/base/errors';
import { createLeaseToken, type BlockingResult } from '../../lib/contract/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import { cancelledRun } from '../helpers/cancelled-runs';
import { tempFile } from '../helpers/temp-file';
import { driverOf } from '../../lib/store/sqlite/driver';
import { EXECUTION_SQL } from '../../lib/store/sqlite/execution-statements';
import { MANAGEMENT_SQL } from '../../lib/store/sqlite/management-statements';
import { SQL } from '../../lib/store/sqlite/prepared';

type Call = readonly [string, () => Promise<unknown>];

/** One call of every public method of the five classes, each with valid input, so only the database can fail it. */
function everyCall(store: SqliteStore, runId: string): Call[] {
  const attemptId = `${runId}-a1`;
  const {
    dispatchRepository: dispatch,
    runStore: runs,
    executionStore: execution,
    runnerStore: runners,
    managementStore: management,
  } = store;
  const grant = { subject: 'alice', projectId: 'project-a', permission: 'run.stop' } as const;
  const rearm = {
    runId,
    subject: 'alice',
    expectedVersion: 2,
    expectedResult: 'invalid' as BlockingResult,
    eventId: 'evt-rearm',
    auditId: 'audit-1',
  };
  return [
    [
      'dispatch.claim',
      () =>
        dispatch.claim({
          runId,
          attemptId,
          cancelRequestedAtMs: 1,
          owner: 'w',
          token: createLeaseToken(),
          leaseDurationMs: 1_000,
        }),
    ],
    [
      'dispatch.recordResult',
      () =>
        dispatch.recordResult({
          runId,
          attemptId,
          owner: 'w',
          token: createLeaseToken(),
          expectedVersion: 1,
          result: 'already_exited',
          eventId: 'evt-r',
        }),
    ],
    [
      'dispatch.claimPage',
      () =>
        dispatch.claimPage({
          owner: 'w',
          leaseDurationMs: 1_000,
          items: [{ runId, attemptId, cancelRequestedAtMs: 1, token: createLeaseToken() }],
        }),
    ],
    [
      'dispatch.recordResults',
      () =>
        dispatch.recordResults([
          {
            runId,
            attemptId,
            owner: 'w',
            token: createLeaseToken(),
            expectedVersion: 1,
            result: 'already_exited',
            eventId: 'evt-rs',
          },
        ]),
    ],
    ['dispatch.duePage', () => dispatch.duePage()],
    ['dispatch.getRecord', () => dispatch.getRecord(runId)],
    ['runs.createRun', () => runs.createRun({ runId: 'run-new', projectId: 'project-a' })],
    ['runs.createAttempt', () => runs.createAttempt({ runId, attemptId: 'att-new' })],
    ['runs.advanceAttempt', () => runs.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'starting' })],
    ['runs.endAttempt', () => runs.endAttempt({ runId, attemptId, status: 'failed' })],
    ['runs.requestCancellation', () => runs.requestCancellation({ runId, reason: 'user', eventId: 'evt-c' })],
    ['runs.requestCancellations', () => runs.requestCancellations([{ runId, reason: 'user', eventId: 'evt-cs' }])],
    ['runs.markTerminal', () => runs.markTerminal({ runId, status: 'failed', eventId: 'evt-t' })],
    ['runs.getRun', () => runs.getRun(runId)],
    ['runs.getAttempt', () => runs.getAttempt(runId, attemptId)],
    ['runs.listEvents', () => runs.listEvents(runId)],
    ['execution.activeAttemptsPage', () => execution.activeAttemptsPage({ limit: 4 })],
    ['execution.dueDeadlinesPage', () => execution.dueDeadlinesPage({ limit: 4 })],
    ['execution.attemptByReceiptDigest', () => execution.attemptByReceiptDigest('a'.repeat(64))],
    [
      'execution.completeAttempt',
      () =>
        execution.completeAttempt({
          runId,
          attemptId,
          status: 'succeeded',
          cause: 'receipt',
          exit: { exitCode: 0, signal: null },
          attemptEventId: 'evt-ae',
          runEventId: 'evt-re',
          journalReceipt: true,
        }),
    ],
    [
      'execution.completeAttempts',
      () =>
        execution.completeAttempts([
          {
            runId,
            attemptId,
            status: 'succeeded',
            cause: 'receipt',
            exit: { exitCode: 0, signal: null },
            attemptEventId: 'evt-aes',
            runEventId: 'evt-res',
            journalReceipt: true,
          },
        ]),
    ],
    [
      'execution.recordQuarantineIntent',
      () => execution.recordQuarantineIntent({ runId, attemptId, reason: 'malformed' }),
    ],
    ['execution.recordReceiptDeletion', () => execution.recordReceiptDeletion({ runId, attemptId })],
    ['execution.openJournalPage', () => execution.openJournalPage({ limit: 4 })],
    ['execution.closeJournalEntry', () => execution.closeJournalEntry({ attemptId, action: 'delete' })],
    ['execution.listAttemptEvents', () => execution.listAttemptEvents(runId, attemptId)],
    [
      'runners.registerRunner',
      () => runners.registerRunner({ runnerId: 'rnr-1', hostId: 'host-1', kind: 'run', identity: '{}' }),
    ],
    ['runners.endRunner', () => runners.endRunner('rnr-1')],
    ['runners.activeAttemptOwner', () => runners.activeAttemptOwner(runId)],
    [
      'runners.adoptionCandidates',
      () => runners.adoptionCandidates({ hostId: 'host-1', excludeRunnerId: 'rnr-2', limit: 4 }),
    ],
    [
      'runners.adoptAttempts',
      () => runners.adoptAttempts({ fromRunnerId: 'rnr-1', toRunnerId: 'rnr-2', proof: 'ended' }),
    ],
    ['management.hasPermission', () => management.hasPermission('alice', 'project-a', 'run.read')],
    ['management.inspectDispatch', () => management.inspectDispatch(runId)],
    ['management.rearm', () => management.rearm(rearm)],
    ['management.summaryCounts', () => management.summaryCounts('alice', 'project-a', 60_000)],
    ['management.blockedRows', () => management.blockedRows('project-a', { kind: 'first' }, 16)],
    [
      'management.runRows',
      () =>
        management.runRows({
          projectId: 'project-a',
          status: null,
          before: { createdAtMs: 1e15, runId: '' },
          limit: 4,
        }),
    ],
    ['management.runDetail', () => management.runDetail(runId, { attempts: 4, attemptEvents: 4, events: 4 })],
    ['management.countGrants', () => management.countGrants()],
    ['management.writeGrant', () => management.writeGrant(grant, 'owner')],
    ['management.revokeGrant', () => management.revokeGrant(grant)],
    ['management.listGrants', () => management.listGrants('alice')],
  ];
}

/** Each call rejects with the store's own error (code, the driver's code as errno), never the driver's error itself. */
async function everyCallFailsTyped(t: ExecutionContext, calls: readonly Call[], errno: RegExp): Promise<void> {
  const untyped: string[] = [];
  for (const [name, call] of calls) {
    const error: unknown = await call().then(
      () => 'no error',
      (failure: unknown) => failure,
    );
    if (!(error instanceof PidfenceError)) {
      untyped.push(`${name}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
      continue;
    }
    t.is(error.code, 'ERR_PIDFENCE_STORE_FAILED', name);
    t.regex(error.errno ?? '', errno, name);
    t.regex(error.message, /^the sqlite store failed during \w+ /, name);
  }
  t.deepEqual(untyped, [], 'calls that let a raw driver error (or success) through');
}

async function storeWithRun(t: ExecutionContext): Promise<{ store: SqliteStore; file: string; runId: string }> {
  const { file, cleanup } = tempFile('pidfence-boundary-');
  t.teardown(cleanup);
  const store = openSqliteStore(file);
  const { runId } = await cancelledRun(store.runStore);
  return { store, file, runId };
}

test('a closed database answers every read and write of the five SQLite classes with ERR_PIDFENCE_STORE_FAILED', async (t) => {
  const { store, runId } = await storeWithRun(t);
  const calls = everyCall(store, runId);
  store.close();
  // better-sqlite3 throws a plain TypeError on a closed connection; it has no SQLite code.
  await everyCallFailsTyped(t, calls, /^UNKNOWN$/);
});

test('a database whose tables were dropped outside pidfence answers every call with ERR_PIDFENCE_STORE_FAILED and the driver code', async (t) => {
  const { store, file, runId } = await storeWithRun(t);
  t.teardown(() => store.close());
  const calls = everyCall(store, runId);
  // Another process removes the schema under the open store: every prepared statement fails to re-prepare.
  const other = new Database(file);
  other.pragma('foreign_keys = OFF');
  const tables = other
    .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name <> 'pidfence_migrations'")
    .pluck()
    .all() as string[];
  for (const table of tables) other.exec(`DROP TABLE "${table}"`);
  other.close();
  await everyCallFailsTyped(t, calls, /^SQLITE_ERROR$/);
});

test('a run or attempt row the schema allows but the contract does not fails closed with ERR_PIDFENCE_INVALID_RECORD on every path that reads it', async (t) => {
  const { store, runId } = await storeWithRun(t);
  t.teardown(() => store.close());
  const attemptId = `${runId}-a1`;
  // Written outside pidfence: no CHECK constraint forbids a space in an id. The pending dispatch
  // the cancel wrote (docs/decisions/0022) references the run's project, so the foreign keys wait.
  driverOf(store.database).pragma('foreign_keys = OFF');
  driverOf(store.database).prepare("UPDATE runs SET project_id = 'project a' WHERE id = ?").run(runId);
  const invalid = { instanceOf: Error, code: 'ERR_PIDFENCE_INVALID_RECORD' } as const;
  await t.throwsAsync(store.runStore.getRun(runId), invalid);
  await t.throwsAsync(store.runStore.markTerminal({ runId, status: 'failed', eventId: 'evt-t' }), invalid);
  await t.throwsAsync(
    store.dispatchRepository.claim({
      runId,
      attemptId,
      cancelRequestedAtMs: 1,
      owner: 'w',
      token: createLeaseToken(),
      leaseDurationMs: 1_000,
    }),
    invalid,
  );
  driverOf(store.database).prepare("UPDATE runs SET project_id = 'project-a' WHERE id = ?").run(runId);
  driverOf(store.database).pragma('foreign_keys = ON');
  driverOf(store.database)
    .prepare('UPDATE attempts SET receipt_token_digest = ? WHERE id = ?')
    .run('Z'.repeat(64), attemptId);
  await t.throwsAsync(store.runStore.getAttempt(runId, attemptId), invalid);
  await t.throwsAsync(
    store.executionStore.completeAttempt({
      runId,
      attemptId,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
      attemptEventId: 'evt-ae',
      runEventId: 'evt-re',
      journalReceipt: false,
    }),
    invalid,
  );
  t.is(
    (
      driverOf(store.database).prepare('SELECT count(*) AS n FROM run_events WHERE run_id = ?').get(runId) as {
        n: number;
      }
    ).n,
    1,
    'nothing was written',
  );
});

test('a write its own transaction guarantees but a foreign trigger swallowed is ERR_PIDFENCE_STORE_INVARIANT, and nothing is written', async (t) => {
  const { store, runId } = await storeWithRun(t);
  t.teardown(() => store.close());
  const run = await store.runStore.getRun(runId);
  const claim = {
    runId,
    attemptId: `${runId}-a1`,
    cancelRequestedAtMs: run?.cancelRequestedAtMs ?? -1,
    owner: 'w',
    token: createLeaseToken(),
    leaseDurationMs: 60_000,
  };
  const invariant = { instanceOf: PidfenceError, code: 'ERR_PIDFENCE_STORE_INVARIANT' } as const;
  const rows = () =>
    driverOf(store.database)
      .prepare(
        `SELECT (SELECT count(*) FROM cancellation_dispatches) AS dispatches,
    (SELECT status || ':' || version FROM cancellation_dispatches WHERE run_id = ?) AS dispatch, (SELECT version FROM runs WHERE id = ?) AS version`,
      )
      .get(runId, runId);
  const before = rows();

  // The lease write (step 6) is skipped by a trigger: the claim's CAS cannot lose under BEGIN IMMEDIATE, so this is no outcome.
  // It is the CAS on the pending record the cancel wrote (docs/decisions/0022).
  driverOf(store.database).exec(
    'CREATE TRIGGER foreign_skip BEFORE UPDATE ON cancellation_dispatches BEGIN SELECT RAISE(IGNORE); END',
  );
  const lost = await t.throwsAsync(store.dispatchRepository.claim(claim), invariant);
  t.regex(
    lost?.message ?? '',
    /^the sqlite store found its own rule broken during claim: the lease CAS lost inside its own write transaction\. /,
  );
  driverOf(store.database).exec('DROP TRIGGER foreign_skip');

  // The run version CAS that reserves an event sequence is skipped the same way.
  const claimed = await store.dispatchRepository.claim(claim);
  if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
  const afterClaim = rows();
  driverOf(store.database).exec(
    'CREATE TRIGGER foreign_skip BEFORE UPDATE OF version ON runs BEGIN SELECT RAISE(IGNORE); END',
  );
  await t.throwsAsync(
    store.dispatchRepository.recordResult({
      runId,
      attemptId: claim.attemptId,
      owner: 'w',
      token: claim.token,
      expectedVersion: claimed.record.version,
      result: 'already_exited',
      eventId: 'evt-r',
    }),
    invariant,
  );
  t.deepEqual(rows(), afterClaim, 'the settle rolled back with the event append');
  t.is((await store.dispatchRepository.getRecord(runId))?.status, 'leased');
  t.notDeepEqual(before, afterClaim);
});

/** Records every statement better-sqlite3 prepares in this process, with the connection that prepared it. */
function preparedLog(t: ExecutionContext): Array<{ readonly database: unknown; readonly sql: string }> {
  const log: Array<{ database: unknown; sql: string }> = [];
  const prototype = Database.prototype as unknown as { prepare: (this: unknown, sql: string) => unknown };
  const prepare = prototype.prepare;
  prototype.prepare = function (this: unknown, sql: string) {
    log.push({ database: this, sql });
    return prepare.call(this, sql);
  };
  t.teardown(() => {
    prototype.prepare = prepare;
  });
  return log;
}

test.serial(
  "one boundary per open store (docs/decisions/0261): opening prepares none of the store's statements; a call prepares only what it runs, once, for all five classes",
  async (t) => {
    const log = preparedLog(t);
    const { file, cleanup } = tempFile('pidfence-lazy-');
    const store = openSqliteStore(file);
    t.teardown(() => {
      store.close();
      cleanup();
    });
    const driver = driverOf(store.database);
    const texts = new Set([SQL, EXECUTION_SQL, MANAGEMENT_SQL].flatMap((set) => Object.values(set)));
    const ours = (from: number): string[] =>
      log
        .slice(from)
        .filter((entry) => entry.database === driver && texts.has(entry.sql))
        .map((entry) => entry.sql);
    t.deepEqual(ours(0), [], "the open prepared no statement of the store's sets");
    let mark = log.length;
    await store.dispatchRepository.getRecord('run-none');
    t.deepEqual(ours(mark), [SQL.selectDispatch], 'getRecord prepared its one statement');
    mark = log.length;
    await store.dispatchRepository.getRecord('run-none');
    await store.managementStore.inspectDispatch('run-none');
    t.false(ours(mark).includes(SQL.selectDispatch), 'a second call, and another class on the same store, reuse it');
    mark = log.length;
    await store.runStore.getRun('run-none');
    t.deepEqual(ours(mark), [SQL.selectRun]);
    const prepared = ours(0).length;
    t.true(prepared < texts.size / 4, `${prepared} of ${texts.size} statements prepared after four kinds of call`);
  },
);
