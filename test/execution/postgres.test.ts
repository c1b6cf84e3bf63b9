// The local execution lifecycle (design/execution) on a real PostgreSQL server, the store connected as the
// runtime role: admission, receipts into terminal states in one transaction, late receipts, durable
// timeout intent before any signal, the shutdown drain, and `pidfence run --db postgres://…`.
// Serial: a drain with scope `all` stops every active attempt of the database the tests share.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { postgresReceiptDirectory } from '../../lib/cli/execution-target';
import {
  createReceiptToken,
  receiptTokenDigest,
  writeReceiptAtomic,
  type CompletionReceipt,
  type ExecutionStores,
} from '../../lib/execution/index';
import { EXECUTION_SQL } from '../../lib/store/postgres/execution-statements';
import { openPostgresStore, type PostgresStore } from '../../lib/store/postgres/index';
import {
  migratedDatabaseForFile,
  runtimeUrlNamed,
  uniqueApplicationName,
  type MigratedDatabase,
} from '../helpers/pg-store';
import {
  handleAlive,
  overriding,
  receiptExists,
  shutdownDrainGate,
  worldOver,
  type World,
  type WorldOptions,
} from './world';
import { delay } from '../helpers/wait';
import { grantCancelOnPostgres } from './cli-runs';

const CLI = path.resolve(__dirname, '..', '..', 'lib', 'cli', 'main.js');

const ready = migratedDatabaseForFile(test, 'pgexec');

function tempDirectory(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-pgexec-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

type PgWorld = Pick<World, 'app' | 'completions' | 'completed'> & {
  readonly store: PostgresStore;
  readonly receipts: string;
  readonly db: MigratedDatabase;
};

/** The execution application over a PostgreSQL store opened as the runtime role. */
async function openPgWorld(
  t: ExecutionContext,
  options: WorldOptions & { readonly wrap?: (store: PostgresStore) => Partial<ExecutionStores> } = {},
): Promise<PgWorld> {
  const db = await ready;
  const store = await openPostgresStore(runtimeUrlNamed(db, uniqueApplicationName('pidfence_exec')), {
    maxConnections: 4,
  });
  const receipts = path.join(tempDirectory(t), 'receipts');
  const stores: ExecutionStores = {
    runStore: store.runStore,
    repository: store.dispatchRepository,
    executionStore: store.executionStore,
    runnerStore: store.runnerStore,
    close: () => store.close(),
    ...(options.wrap?.(store) ?? {}),
  };
  return { store, receipts, db, ...worldOver(t, stores, receipts, options) };
}

async function ownerRows<R>(db: MigratedDatabase, text: string, values: unknown[]): Promise<R[]> {
  return (await db.owner.query(text, values)).rows as R[];
}

function receiptFor(
  runId: string,
  attemptId: string,
  token: string,
  extra: Partial<Omit<CompletionReceipt, 'v'>> = {},
): CompletionReceipt {
  const now = Date.now();
  return {
    v: 1,
    runId,
    attemptId,
    seq: 1,
    token,
    exitCode: 0,
    signal: null,
    startedAtMs: now,
    finishedAtMs: now,
    spawnFailed: false,
    ...extra,
  };
}

test.serial(
  'postgres: admission stores the run, the attempt and its exact handle; the receipt commits attempt and run terminal states with both events in one transaction',
  async (t) => {
    const world = await openPgWorld(t);
    const admitted = await world.app.admit({ projectId: 'p1', command: 'sh', args: ['-c', 'exit 3'] });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    const run = await world.store.runStore.getRun(admitted.runId);
    const attempt = await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId);
    t.like(run, { projectId: 'p1', status: 'running', cancelRequestedAtMs: null });
    t.is(attempt?.status, 'running');
    t.regex(attempt?.handle ?? '', /\S/, 'the exact handle is durable');
    t.regex(attempt?.receiptTokenDigest ?? '', /^[0-9a-f]{64}$/);
    t.deepEqual(await world.store.executionStore.attemptByReceiptDigest(attempt?.receiptTokenDigest ?? ''), {
      runId: admitted.runId,
      attemptId: admitted.attemptId,
    });
    const active = await world.store.executionStore.activeAttemptsPage({ limit: 64 });
    t.like(
      active.items.find((item) => item.runId === admitted.runId),
      { attemptId: admitted.attemptId, status: 'running', hasHandle: true, cancelReason: null },
    );

    world.app.start();
    const outcome = await world.completed(admitted.runId);
    t.like(outcome, { kind: 'completed', status: 'failed', cause: 'receipt', exitCode: 3, signal: null });
    t.like(await world.store.runStore.getRun(admitted.runId), { status: 'failed' });
    t.like(await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId), { status: 'failed' });
    const attemptEvents = await world.store.executionStore.listAttemptEvents(admitted.runId, admitted.attemptId);
    t.deepEqual(
      attemptEvents.map((e) => [e.type, e.seq, e.payload]),
      [['attempt.terminal', 1, { status: 'failed', cause: 'receipt', exitCode: 3, signal: null }]],
    );
    const runEvents = await world.store.runStore.listEvents(admitted.runId);
    t.deepEqual(
      runEvents.map((e) => [e.type, e.payload]),
      [['run.terminal', { status: 'failed', attemptId: admitted.attemptId }]],
    );
    t.is(attemptEvents[0]?.createdAtMs, runEvents[0]?.createdAtMs, 'one database time');
    // One transaction: the attempt, both events and the journal row carry the same xmin.
    const xmins = await ownerRows<{ x: string }>(
      world.db,
      `SELECT xmin::text AS x FROM attempts WHERE id = $1
    UNION ALL SELECT xmin::text FROM attempt_events WHERE attempt_id = $1
    UNION ALL SELECT xmin::text FROM run_events WHERE run_id = $2 AND type = 'run.terminal'`,
      [admitted.attemptId, admitted.runId],
    );
    t.is(xmins.length, 3);
    t.is(new Set(xmins.map((row) => row.x)).size, 1, JSON.stringify(xmins));
    t.false(receiptExists(world.receipts, admitted.attemptId), 'deleted after the commit');
    const journal = await ownerRows(
      world.db,
      'SELECT action, done_at_ms IS NOT NULL AS done FROM receipt_journal WHERE attempt_id = $1',
      [admitted.attemptId],
    );
    t.deepEqual(journal, [{ action: 'delete', done: true }]);
    const dump = JSON.stringify(
      await ownerRows(
        world.db,
        'SELECT payload FROM run_events WHERE run_id = $1 UNION ALL SELECT payload FROM attempt_events WHERE run_id = $1',
        [admitted.runId],
      ),
    );
    t.false(/exit 3|sh -c|"sh"/.test(dump), 'nothing about the command reaches the store');
  },
);

test.serial('postgres: a late or repeated receipt never overwrites a terminal state', async (t) => {
  const world = await openPgWorld(t);
  const { runStore, executionStore } = world.store;
  const token = createReceiptToken();
  await runStore.createRun({ runId: 'pg-late', projectId: 'p1' });
  await runStore.createAttempt({
    runId: 'pg-late',
    attemptId: 'pg-late-a1',
    receiptTokenDigest: receiptTokenDigest(token),
  });
  await runStore.requestCancellation({ runId: 'pg-late', reason: 'user', eventId: 'evt-pg-late' });
  t.like(await world.app.processor.process({ runId: 'pg-late', attemptId: 'pg-late-a1' }), {
    kind: 'completed',
    status: 'cancelled',
    cause: 'never_started',
  });
  // The success receipt arrives after the cancelled commit, twice.
  writeReceiptAtomic(world.receipts, receiptFor('pg-late', 'pg-late-a1', token));
  t.like(await world.app.processor.process({ runId: 'pg-late', attemptId: 'pg-late-a1' }), {
    kind: 'terminal',
    status: 'cancelled',
    lateReceipt: true,
  });
  t.false(receiptExists(world.receipts, 'pg-late-a1'));
  writeReceiptAtomic(world.receipts, receiptFor('pg-late', 'pg-late-a1', token));
  t.like(await world.app.processor.process({ runId: 'pg-late', attemptId: 'pg-late-a1' }), {
    kind: 'terminal',
    status: 'cancelled',
    lateReceipt: true,
  });
  t.false(receiptExists(world.receipts, 'pg-late-a1'));
  t.like(await runStore.getRun('pg-late'), { status: 'cancelled', cancelReason: 'user' });
  t.like(await runStore.getAttempt('pg-late', 'pg-late-a1'), { status: 'cancelled' });
  // The store's own CAS refuses a second terminal write, and writes no event.
  const again = await executionStore.completeAttempt({
    runId: 'pg-late',
    attemptId: 'pg-late-a1',
    status: 'succeeded',
    cause: 'receipt',
    exit: { exitCode: 0, signal: null },
    attemptEventId: 'evt-pg-late-a2',
    runEventId: 'evt-pg-late-r2',
    journalReceipt: true,
  });
  t.like(again, { kind: 'already_terminal', attempt: { status: 'cancelled' } });
  t.is((await executionStore.listAttemptEvents('pg-late', 'pg-late-a1')).length, 1);
  t.deepEqual(
    (await runStore.listEvents('pg-late')).map((e) => e.type),
    ['run.cancel_requested', 'run.terminal'],
  );
  t.deepEqual(
    await executionStore.completeAttempt({
      runId: 'pg-none',
      attemptId: 'pg-none-a1',
      status: 'succeeded',
      cause: 'receipt',
      exit: null,
      attemptEventId: 'evt-n1',
      runEventId: 'evt-n2',
      journalReceipt: false,
    }),
    { kind: 'missing' },
  );
  await t.throwsAsync(executionStore.activeAttemptsPage({ limit: 65 }), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
  // Journal rows are closed, never deleted; a repeated deletion intent stays one row.
  const journal = await ownerRows(
    world.db,
    'SELECT action, done_at_ms IS NOT NULL AS done FROM receipt_journal WHERE attempt_id = $1',
    ['pg-late-a1'],
  );
  t.deepEqual(journal, [{ action: 'delete', done: true }]);
});

test.serial(
  'postgres: a deadline becomes durable timeout intent before any signal; without the intent nothing is signalled',
  async (t) => {
    let failIntent = true;
    const world = await openPgWorld(t, {
      wrap: (store) => ({
        runStore: overriding(store.runStore, {
          requestCancellation: async (command: Parameters<typeof store.runStore.requestCancellation>[0]) => {
            if (failIntent) throw new Error('injected intent failure');
            return store.runStore.requestCancellation(command);
          },
        }),
      }),
    });
    const admitted = await world.app.admit({ projectId: 'p1', command: 'sleep', args: ['30'], timeoutMs: 1 });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    const handle = (await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId))?.handle ?? '';
    await delay(20);
    const due = await world.store.executionStore.dueDeadlinesPage({ limit: 64 });
    t.true(
      due.items.some((item) => item.runId === admitted.runId),
      'due by the database clock',
    );
    await t.throwsAsync(world.app.lifecycle.runCycle(), { message: /injected intent failure/ });
    t.true(handleAlive(handle), 'no intent, so no signal');
    t.like(await world.store.runStore.getRun(admitted.runId), { status: 'running', cancelRequestedAtMs: null });
    t.deepEqual(await world.store.runStore.listEvents(admitted.runId), []);

    failIntent = false;
    await world.app.lifecycle.runCycle();
    const events = (await world.store.runStore.listEvents(admitted.runId)).map((e) => [e.type, e.payload]);
    t.deepEqual(events.slice(0, 2), [
      ['run.cancel_requested', { reason: 'timeout' }],
      ['run.cancel_dispatched', { attemptId: admitted.attemptId, dispatchCount: 1, result: 'termination_requested' }],
    ]);
    t.false(
      (await world.store.executionStore.dueDeadlinesPage({ limit: 64 })).items.some(
        (item) => item.runId === admitted.runId,
      ),
      'a run with intent is no longer due',
    );
    await world.app.lifecycle.runCycle();
    t.like(await world.store.runStore.getRun(admitted.runId), { cancelReason: 'timeout', status: 'timed_out' });
    t.false(handleAlive(handle));
  },
);

test.serial(
  'postgres: the shutdown drain writes shutdown intent first, keeps an existing reason, and stops the exact executions before storage closes',
  async (t) => {
    const activeAtClose: number[] = [];
    const world = await openPgWorld(t, {
      wrap: (store) => ({
        close: async () => {
          const db = await ready;
          const [row] = await ownerRows<{ n: number }>(
            db,
            "SELECT count(*)::int AS n FROM attempts WHERE status IN ('claimed', 'starting', 'running')",
            [],
          );
          activeAtClose.push(row?.n ?? -1);
          await store.close();
        },
      }),
    });
    await shutdownDrainGate(t, { app: world.app, runStore: world.store.runStore }, activeAtClose, async () => {
      const reopened = await openPostgresStore(runtimeUrlNamed(world.db, uniqueApplicationName('pidfence_exec')), {
        maxConnections: 2,
      });
      t.teardown(() => reopened.close());
      return reopened.runStore;
    });
  },
);

test.serial(
  'postgres: due deadlines and open journal rows page by a stable keyset on the database clock, at most 64 a page',
  async (t) => {
    const world = await openPgWorld(t);
    const { runStore, executionStore } = world.store;
    for (let i = 0; i < 20; i += 1) {
      const runId = `pg-d${String(i).padStart(2, '0')}`;
      await runStore.createRun({ runId, projectId: 'p1' });
      await runStore.createAttempt({ runId, attemptId: `${runId}-a1`, timeoutMs: 1 });
      await executionStore.recordQuarantineIntent({ runId, attemptId: `${runId}-a1`, reason: 'token' });
      await executionStore.recordReceiptDeletion({ runId, attemptId: `${runId}-a1` });
    }
    await delay(5);
    const seen: string[] = [];
    let after;
    for (;;) {
      const page = await executionStore.dueDeadlinesPage(after === undefined ? { limit: 7 } : { limit: 7, after });
      t.true(page.items.length <= 7);
      seen.push(...page.items.filter((item) => item.runId.startsWith('pg-d')).map((item) => item.runId));
      if (page.next === null) break;
      after = page.next;
    }
    t.is(new Set(seen).size, 20);
    t.is(seen.length, 20, 'no item twice');
    const journal: string[] = [];
    let cursor;
    for (;;) {
      const page = await executionStore.openJournalPage(
        cursor === undefined ? { limit: 9 } : { limit: 9, after: cursor },
      );
      journal.push(
        ...page.items.filter((item) => item.runId.startsWith('pg-d')).map((item) => `${item.attemptId}/${item.action}`),
      );
      if (page.next === null) break;
      cursor = page.next;
    }
    t.is(journal.length, 40);
    t.is(new Set(journal).size, 40);
    await executionStore.closeJournalEntry({ attemptId: 'pg-d00-a1', action: 'quarantine' });
    await executionStore.recordQuarantineIntent({ runId: 'pg-d01', attemptId: 'pg-d01-a1', reason: 'token' });
    const rows = await ownerRows(
      world.db,
      "SELECT attempt_id AS a, reason, done_at_ms IS NOT NULL AS done FROM receipt_journal WHERE action = 'quarantine' AND attempt_id IN ('pg-d00-a1', 'pg-d01-a1') ORDER BY attempt_id",
      [],
    );
    t.deepEqual(rows, [
      { a: 'pg-d00-a1', reason: 'token', done: true },
      { a: 'pg-d01-a1', reason: 'token', done: false },
    ]);
    // The due source can walk attempts_deadline_due (on a table this small only with seq scans off).
    const client = await world.db.owner.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = JSON.stringify(
        (await client.query(`EXPLAIN (FORMAT JSON) ${EXECUTION_SQL.dueDeadlinesPage}`, [-1, '', '', 7])).rows,
      );
      t.regex(plan, /attempts_deadline_due/, plan);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    await t.throwsAsync(executionStore.dueDeadlinesPage({ limit: 65 }), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
    await t.throwsAsync(
      executionStore.recordQuarantineIntent({ runId: 'pg-d01', attemptId: 'pg-d01-a1', reason: 'bogus' as never }),
      { code: 'ERR_PIDFENCE_INVALID_COMMAND' },
    );
    // Leave nothing due for the other tests' control cycles.
    for (let i = 0; i < 20; i += 1) {
      const runId = `pg-d${String(i).padStart(2, '0')}`;
      await runStore.markTerminal({
        runId,
        attemptId: `${runId}-a1`,
        status: 'cancelled',
        eventId: `evt-${runId}-end`,
      });
    }
  },
);

function cliAsync(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`pidfence ${args[0] ?? ''} did not exit within 60 s: ${stderr}`));
    }, 60_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

test.serial(
  "postgres: pidfence run --db <runtime postgres url> exits with the job's status and records the run failed",
  async (t) => {
    const db = await ready;
    const state = tempDirectory(t);
    const result = await cliAsync(['run', '--db', db.runtimeUrl, '--project', 'p1', '--', 'sh', '-c', 'exit 3'], {
      XDG_STATE_HOME: state,
      PIDFENCE_RECEIPTS: '',
    });
    t.is(result.status, 3, result.stderr);
    const runId = /run (run-[0-9a-f-]+) started/.exec(result.stderr)?.[1];
    t.truthy(runId, result.stderr);
    t.regex(result.stderr, /pidfence: run run-[0-9a-f-]+ failed\n$/);
    // Receipts live on this host, one directory per server and database, whichever role connects.
    const receipts = postgresReceiptDirectory(db.runtimeUrl, { XDG_STATE_HOME: state });
    t.is(receipts, postgresReceiptDirectory(db.ownerUrl, { XDG_STATE_HOME: state }));
    t.true(receipts.startsWith(path.join(state, 'pidfence', 'receipts', 'pg-')));
    t.true(existsSync(receipts));
    t.is(postgresReceiptDirectory(db.runtimeUrl, { PIDFENCE_RECEIPTS: state }), state);
    const store = await openPostgresStore(db.runtimeUrl, { maxConnections: 1 });
    t.teardown(() => store.close());
    t.like(await store.runStore.getRun(runId ?? ''), { status: 'failed' });
    const [attempt] = await ownerRows<{ run_id: string; status: string }>(
      db,
      'SELECT run_id, status FROM attempts WHERE run_id = $1',
      [runId],
    );
    t.like(attempt, { status: 'failed' });
  },
);

test.serial(
  "postgres: run --name keeps the job's log beside the host-local receipts; logs, list and show read them as the runtime role; the CHECK refuses a bad name",
  async (t) => {
    const db = await ready;
    const state = tempDirectory(t);
    const env = { XDG_STATE_HOME: state, PIDFENCE_RECEIPTS: '' };
    await grantCancelOnPostgres(db.ownerUrl, db.runtimeRole, 'p1');
    const ran = await cliAsync(
      [
        'run',
        '--db',
        db.runtimeUrl,
        '--project',
        'p1',
        '--name',
        'pg-named',
        '--',
        'sh',
        '-c',
        'echo pg-out; echo pg-err >&2',
      ],
      env,
    );
    t.is(ran.status, 0, ran.stderr);
    const runId = /run (run-[0-9a-f-]+) started/.exec(ran.stderr)?.[1] ?? '';
    const logs = `${postgresReceiptDirectory(db.runtimeUrl, env)}.logs`;
    t.true(existsSync(path.join(logs, `${runId}.log`)), 'beside the receipts of this server and database');
    const printed = await cliAsync(['logs', runId, '--db', db.runtimeUrl], env);
    t.is(printed.status, 0, printed.stderr);
    t.is(printed.stdout, 'pg-out\npg-err\n');
    const listed = JSON.parse(
      (await cliAsync(['list', '--project', 'p1', '--db', db.runtimeUrl, '--json'], env)).stdout,
    ) as { items: Array<{ runId: string; name: string | null }> };
    t.is(listed.items.find((item) => item.runId === runId)?.name, 'pg-named');
    t.regex((await cliAsync(['show', runId, '--db', db.runtimeUrl], env)).stdout, /\n {2}name +pg-named\n/);
    // Another host's receipts (here: another state directory) hold no log of it.
    const elsewhere = await cliAsync(['logs', runId, '--db', db.runtimeUrl, '--json'], {
      XDG_STATE_HOME: tempDirectory(t),
      PIDFENCE_RECEIPTS: '',
    });
    t.is(elsewhere.status, 4);
    t.like(JSON.parse(elsewhere.stderr), { error: { code: 'ERR_PIDFENCE_RUN_NO_LOG' } });
    const bad = await db.owner
      .query(
        "INSERT INTO runs (id, project_id, owner, status, version, next_event_seq, created_at_ms, updated_at_ms, name) VALUES ('run-pg-bad-name', 'p1', 'runtime', 'queued', 0, 1, 0, 0, 'bad name')",
      )
      .then(
        () => null,
        (error: { code?: string; constraint?: string }) => error,
      );
    t.like(bad, { code: '23514', constraint: 'runs_name_check' });
  },
);
