// A page of attempt ends (docs/decisions/0431), one rule suite on both stores: each attempt gets
// exactly what the single completeAttempt writes or answers (the terminal CAS, its two events, the
// receipt's journal row, or the refusal), in the commands' order, in one transaction: a page the
// database refuses writes none of its ends.
import { randomBytes } from 'node:crypto';

import test, { type ExecutionContext } from 'ava';
import { Pool } from 'pg';

import type { CompleteAttemptCommand, CompleteAttemptOutcome } from '../../lib/contract/index';
import type { ExecutionStore } from '../../lib/store/execution-store';
import type { RunStore } from '../../lib/store/run-store';
import { openPostgresStore, PostgresExecutionStore } from '../../lib/store/postgres/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { driverOf } from '../../lib/store/sqlite/driver';
import { migratedDatabaseForFile, runtimeUrlNamed, uniqueApplicationName } from '../helpers/pg-store';
import { tempFile } from '../helpers/temp-file';
import { tallyWire, wireSince } from '../helpers/wire-tally';

interface Stores {
  readonly runStore: RunStore;
  readonly executionStore: ExecutionStore;
  /** Makes the next write of a run.terminal event fail, as a database refusal would. */
  failTerminalEvents(): Promise<void>;
}

const ready = migratedDatabaseForFile(test, 'endpage');

/** Runs whose id starts with this get no run.terminal event: the database refuses their end. */
const REFUSED = 'zbad-';

async function openSqlite(t: ExecutionContext): Promise<Stores> {
  const { file, cleanup } = tempFile('pidfence-end-page-');
  const store = openSqliteStore(file);
  t.teardown(() => {
    store.close();
    cleanup();
  });
  return {
    runStore: store.runStore,
    executionStore: store.executionStore,
    failTerminalEvents: async () => {
      driverOf(store.database).exec(
        `CREATE TRIGGER test_fail_terminal BEFORE INSERT ON run_events WHEN NEW.type = 'run.terminal' AND NEW.run_id LIKE '${REFUSED}%' BEGIN SELECT RAISE(ABORT, 'injected'); END`,
      );
    },
  };
}

async function openPostgres(t: ExecutionContext): Promise<Stores> {
  const db = await ready;
  const store = await openPostgresStore(runtimeUrlNamed(db, uniqueApplicationName('pidfence_endpage')));
  t.teardown(() => store.close());
  return {
    runStore: store.runStore,
    executionStore: store.executionStore,
    failTerminalEvents: async () => {
      const fn = `test_fail_terminal_${randomBytes(4).toString('hex')}`;
      await db.owner.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.type = 'run.terminal' AND NEW.run_id LIKE '${REFUSED}%' THEN RAISE EXCEPTION 'injected'; END IF;
          RETURN NEW;
        END $$`);
      await db.owner.query(`CREATE TRIGGER ${fn} BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
      t.teardown(async () => {
        await db.owner.query(`DROP TRIGGER ${fn} ON run_events`);
        await db.owner.query(`DROP FUNCTION ${fn}()`);
      });
    },
  };
}

const STORES = [
  ['sqlite', openSqlite],
  ['postgres', openPostgres],
] as const;

/** Runs `<prefix>-running` (a running attempt), `-ended` (terminal), `-missing` (none), `-cancelled` (intent). */
async function seed(runStore: RunStore, prefix: string): Promise<string[]> {
  const ids = ['running', 'ended', 'missing', 'cancelled'].map((kind) => `${prefix}-${kind}`);
  const [running, ended, , cancelled] = ids as [string, string, string, string];
  for (const runId of [running, ended, cancelled]) {
    await runStore.createRun({ runId, projectId: 'project-ep' });
    await runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
    await runStore.advanceAttempt({ runId, attemptId: `${runId}-a1`, from: 'claimed', to: 'running' });
  }
  await runStore.markTerminal({ runId: ended, attemptId: `${ended}-a1`, status: 'failed', eventId: `${ended}-end` });
  await runStore.requestCancellation({ runId: cancelled, reason: 'user', eventId: `${cancelled}-ask` });
  return ids;
}

function endOf(runId: string, index: number): CompleteAttemptCommand {
  return {
    runId,
    attemptId: `${runId}-a1`,
    status: index === 3 ? 'cancelled' : 'succeeded',
    cause: index === 3 ? 'stopped' : 'receipt',
    exit: index === 3 ? null : { exitCode: 0, signal: null },
    attemptEventId: `${runId}-ae`,
    runEventId: `${runId}-re`,
    journalReceipt: index !== 3,
  };
}

/** What an attempt's end left, without times, its run's id written RUN. */
async function shapeOf(stores: Stores, runId: string): Promise<unknown> {
  const run = await stores.runStore.getRun(runId);
  const attempt = await stores.runStore.getAttempt(runId, `${runId}-a1`);
  const events = (await stores.runStore.listEvents(runId)).map(({ type, seq, payload }) => ({ type, seq, payload }));
  const attemptEvents = (await stores.executionStore.listAttemptEvents(runId, `${runId}-a1`)).map(
    ({ type, payload }) => ({ type, payload }),
  );
  const shape = { status: run?.status, version: run?.version, attempt: attempt?.status, events, attemptEvents };
  return JSON.parse(JSON.stringify(shape).replaceAll(runId, 'RUN')) as unknown;
}

function kindsOf(outcomes: readonly CompleteAttemptOutcome[]): string[] {
  return outcomes.map((outcome) => outcome.kind);
}

for (const [name, open] of STORES) {
  test(`${name}: a page of ends writes for each attempt what a single end writes, in order`, async (t) => {
    const stores = await open(t);
    const paged = await seed(stores.runStore, `${name}-p`);
    const single = await seed(stores.runStore, `${name}-s`);
    // Reversed, so the answers must follow the commands and not the store's lock order.
    const pageOrder = [...paged].reverse();
    const outcomes = await stores.executionStore.completeAttempts(
      pageOrder.map((runId) => endOf(runId, paged.indexOf(runId))),
    );
    const one: CompleteAttemptOutcome[] = [];
    for (const [i, runId] of single.entries()) one.push(await stores.executionStore.completeAttempt(endOf(runId, i)));
    t.deepEqual(kindsOf(outcomes), ['completed', 'missing', 'already_terminal', 'completed']);
    t.deepEqual(kindsOf(outcomes), kindsOf([...one].reverse()));
    for (const [i, runId] of paged.entries())
      t.deepEqual(await shapeOf(stores, runId), await shapeOf(stores, single[i] as string), runId);
    t.like(await stores.runStore.getRun(`${name}-p-cancelled`), { status: 'cancelled' });
    // A repeated page changes nothing: every end is already terminal, no event is added.
    const again = await stores.executionStore.completeAttempts([endOf(`${name}-p-running`, 0)]);
    t.deepEqual(kindsOf(again), ['already_terminal']);
    t.is((await stores.runStore.listEvents(`${name}-p-running`)).length, 1);
  });

  test(`${name}: a never-started end sent failed takes the run's cancel intent, read under the run lock (docs/decisions/0440): cancelled for a cancel, timed_out for a timeout, failed without one; no other end is changed`, async (t) => {
    const stores = await open(t);
    const { runStore, executionStore } = stores;
    const ids = ['user', 'timeout', 'none', 'lost'].map((kind) => `${name}-ns-${kind}`);
    for (const runId of ids) {
      await runStore.createRun({ runId, projectId: 'project-ep' });
      await runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
    }
    const [user, timeout, none, lost] = ids as [string, string, string, string];
    await runStore.requestCancellation({ runId: user, reason: 'user', eventId: `${user}-ask` });
    await runStore.requestCancellation({ runId: timeout, reason: 'timeout', eventId: `${timeout}-ask` });
    await runStore.requestCancellation({ runId: lost, reason: 'shutdown', eventId: `${lost}-ask` });
    const end = (runId: string, cause: 'never_started' | 'lost'): CompleteAttemptCommand => ({
      ...endOf(runId, 0),
      status: 'failed',
      cause,
      exit: null,
      journalReceipt: false,
    });
    const [single, ...page] = [
      end(user, 'never_started'),
      end(timeout, 'never_started'),
      end(none, 'never_started'),
      end(lost, 'lost'),
    ];
    t.like(await executionStore.completeAttempt(single as CompleteAttemptCommand), {
      kind: 'completed',
      attempt: { status: 'cancelled' },
    });
    t.deepEqual(kindsOf(await executionStore.completeAttempts(page)), ['completed', 'completed', 'completed']);
    const statuses = await Promise.all(ids.map(async (runId) => (await runStore.getRun(runId))?.status));
    t.deepEqual(statuses, ['cancelled', 'timed_out', 'failed', 'failed']);
    const [attemptEnd] = await executionStore.listAttemptEvents(timeout, `${timeout}-a1`);
    t.like(attemptEnd?.payload, { status: 'timed_out', cause: 'never_started' });
    const runEnd = (await runStore.listEvents(timeout)).find((event) => event.type === 'run.terminal');
    t.like(runEnd?.payload, { status: 'timed_out' });
  });

  test(`${name}: a page the database refuses writes none of its ends`, async (t) => {
    const stores = await open(t);
    // The refused end comes last in the page and in the run-id order the store locks in.
    const good = await seed(stores.runStore, `a-${name}`);
    const bad = await seed(stores.runStore, `${REFUSED}${name}`);
    await stores.failTerminalEvents();
    const page = [endOf(good[0] as string, 0), endOf(bad[0] as string, 0)];
    await t.throwsAsync(stores.executionStore.completeAttempts(page));
    t.like(await stores.runStore.getRun(good[0] as string), { status: 'running' });
    t.like(await stores.runStore.getAttempt(good[0] as string, `${good[0] as string}-a1`), { status: 'running' });
    t.deepEqual(await stores.executionStore.listAttemptEvents(good[0] as string, `${good[0] as string}-a1`), []);
  });

  test(`${name}: a bad page is refused whole with a typed error`, async (t) => {
    const stores = await open(t);
    const [running] = (await seed(stores.runStore, `${name}-v`)) as [string];
    const { executionStore } = stores;
    await t.throwsAsync(executionStore.completeAttempts([]), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
    const tooMany = Array.from({ length: 65 }, (_, i) => endOf(`r-${i}`, 0));
    await t.throwsAsync(executionStore.completeAttempts(tooMany), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
    await t.throwsAsync(executionStore.completeAttempts([endOf(running, 0), endOf(running, 0)]), {
      code: 'ERR_PIDFENCE_INVALID_COMMAND',
      message: /names a run twice/,
    });
    await t.throwsAsync(executionStore.completeAttempts([{ ...endOf(running, 0), status: 'x' } as never]), {
      code: 'ERR_PIDFENCE_INVALID_RUN_STATUS',
    });
    await t.throwsAsync(executionStore.completeAttempts('r' as never), { code: 'ERR_PIDFENCE_INVALID_COMMAND' });
    t.like(await stores.runStore.getRun(running), { status: 'running' });
  });
}

test('postgres: a page of ends costs the same few statements for 1 end and for 40, not a few per end (docs/decisions/0446)', async (t) => {
  const db = await ready;
  const stores = await openPostgres(t);
  const pool = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  t.teardown(() => pool.end());
  const wire = tallyWire(pool);
  const executionStore = new PostgresExecutionStore(pool);
  const runningOf = async (prefix: string, count: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(((await seed(stores.runStore, `${prefix}-${i}`)) as [string])[0]);
    return ids;
  };
  const [one, forty] = [await runningOf('wire-1', 1), await runningOf('wire-40', 40)];
  // The connection's once-only durability check (lib/store/postgres/transaction.ts) is not the page's.
  await executionStore.storeNowMs();
  const costOf = async (runIds: readonly string[]): Promise<number> => {
    const before = { ...wire };
    const outcomes = await executionStore.completeAttempts(runIds.map((runId) => endOf(runId, 0)));
    t.deepEqual(new Set(kindsOf(outcomes)), new Set(['completed']));
    return wireSince(before, wire).statements;
  };
  const [costOfOne, costOfForty] = [await costOf(one), await costOf(forty)];
  t.log(`statements: ${costOfOne} for 1 end, ${costOfForty} for 40`);
  t.is(costOfForty, costOfOne);
});
