// Issue 15 item 6 (docs/decisions/0140): `pidfence list` / `ps` and `pidfence show` over real runs
// made by `pidfence run` on a real SQLite file, text and --json alike, and `status` while a job runs.
// Neither view ever shows a PID, handle, command or environment; a foreign run answers like a missing one.
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { openSqliteStore } from '../../lib/store/sqlite/index';
import { cancel, grantCancelOnSqlite, sqliteJobGroup, startRun } from '../execution/cli-runs';
import { disownStore, pidfence, tempDir, type Run } from './pidfence-process';
import { driverOf } from '../../lib/store/sqlite/driver';
import { cgroupUnavailable } from '../helpers/cgroup';

interface ListedRun {
  runId: string;
  status: string;
  cancelReason: string | null;
  createdAtMs: number;
  startedAtMs: number | null;
  endedAtMs: number | null;
  exit: { cause: string; exitCode: number | null; signal: string | null } | null;
}

/** Every process fact the store holds about the runs: none of it may appear in a view. */
function processFacts(db: string): { pids: number[]; handles: string[] } {
  const store = openSqliteStore(db);
  try {
    const rows = driverOf(store.database)
      .prepare('SELECT pid, handle FROM attempts WHERE pid IS NOT NULL')
      .all() as Array<{ pid: number; handle: string }>;
    return { pids: rows.map((row) => row.pid), handles: rows.map((row) => row.handle) };
  } finally {
    store.close();
  }
}

function assertPrivate(t: ExecutionContext, db: string, outputs: readonly Run[]): void {
  const text = outputs.map((output) => output.stdout + output.stderr).join('\n');
  const { pids, handles } = processFacts(db);
  t.true(pids.length > 0, 'the store does hold process facts');
  for (const pid of pids) t.false(new RegExp(`(^|[^0-9-])${pid}([^0-9-]|$)`).test(text), `a view shows PID ${pid}`);
  for (const handle of handles) t.false(text.includes(handle), 'a view shows a handle');
  for (const secret of ['secret-arg-9c1', 'hunter2', 'sh -c', 'sleep', '"pid"', 'handle', 'bootId', 'startTicks'])
    t.false(text.includes(secret), `a view shows ${secret}`);
}

/** The table rows of `pidfence list`: run id → its cells. */
function listRows(text: string): Map<string, string[]> {
  return new Map(
    text
      .split('\n')
      .filter((line) => /^ {2}run-/.test(line))
      .map((line) => {
        const cells = line.trim().split(/\s+/);
        return [cells[0] ?? '', cells];
      }),
  );
}

test('list and show over real runs: text and --json carry the same facts, status counts the running job, and no view shows a PID, handle, command or environment', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  await grantCancelOnSqlite(db);
  const failed = await pidfence(['run', '--db', db, '--', 'sh', '-c', 'exit 3', 'secret-arg-9c1'], {
    JOB_SECRET: 'hunter2',
  });
  t.is(failed.code, 3, failed.stderr);
  const failedId = /run (run-[0-9a-f-]+) started/.exec(failed.stderr)?.[1] ?? '';
  const running = await startRun(t, db, sqliteJobGroup(db), ['sleep', '30']);

  // A job is running: the project is converging (exit 10), and says how many jobs run.
  const busy = await pidfence(['status', '--project', 'default', '--db', db]);
  t.is(busy.code, 10, busy.stderr);
  t.regex(busy.stdout, /^project default: converging\n[\s\S]*\n {2}running jobs +1\n$/);
  t.like(JSON.parse((await pidfence(['status', '--project', 'default', '--db', db, '--json'])).stdout), {
    assessment: 'converging',
    running: 1,
    total: 0,
  });

  const text = await pidfence(['list', '--db', db]);
  const json = await pidfence(['ps', '--db', db, '--json']);
  t.is(text.code, 0, text.stderr);
  t.is(json.code, 0, json.stderr);
  const page = JSON.parse(json.stdout) as {
    projectId: string;
    state: string | null;
    items: ListedRun[];
    next: string | null;
  };
  t.deepEqual(
    page.items.map((item) => item.runId),
    [running.runId, failedId],
    'newest first',
  );
  t.like(page, { projectId: 'default', state: null, next: null });
  t.like(page.items[0], { status: 'running', endedAtMs: null, exit: null });
  t.like(page.items[1], {
    status: 'failed',
    cancelReason: null,
    exit: { cause: 'receipt', exitCode: 3, signal: null },
  });
  t.regex(
    text.stdout,
    /^project default: 2 run\(s\) on this page, newest first\n {2}run +name +state +started +ended +exit +reason\n/,
  );
  const rows = listRows(text.stdout);
  t.deepEqual(rows.get(running.runId), [
    running.runId,
    '-',
    'running',
    new Date(page.items[0]?.startedAtMs ?? 0).toISOString(),
    '-',
    '-',
    '-',
  ]);
  t.deepEqual(rows.get(failedId), [
    failedId,
    '-',
    'failed',
    new Date(page.items[1]?.startedAtMs ?? 0).toISOString(),
    new Date(page.items[1]?.endedAtMs ?? 0).toISOString(),
    '3',
    '-',
  ]);
  t.regex(text.stdout, /\nlast page\n$/);

  const shownText = await pidfence(['show', failedId, '--db', db]);
  const shownJson = await pidfence(['show', failedId, '--db', db, '--json']);
  t.is(shownText.code, 0, shownText.stderr);
  const shown = JSON.parse(shownJson.stdout) as {
    status: string;
    exit: ListedRun['exit'];
    attempts: Array<{ attemptId: string; containment: string | null }>;
    events: Array<{ type: string }>;
    dispatch: unknown;
  };
  t.like(shown, { status: 'failed', exit: { cause: 'receipt', exitCode: 3, signal: null }, dispatch: null });
  t.deepEqual(
    shown.events.map((event) => event.type),
    ['run.terminal'],
  );
  t.regex(shownText.stdout, new RegExp(`^run ${failedId} \\(project default\\): failed\\n`));
  t.regex(shownText.stdout, /\n {2}exit code +3\n {2}signal +-\n {2}ended by +receipt\n/);
  // What a stop of it reached (docs/decisions/0180): its own cgroup where this machine gives one.
  const containment = cgroupUnavailable() === null ? 'cgroup' : 'group';
  t.regex(
    shownText.stdout,
    new RegExp(`\\n {2}${shown.attempts[0]?.attemptId ?? '?'} +failed +\\S+ +- +3 +receipt +${containment}\\n`),
  );
  t.like(shown.attempts[0], { containment });
  t.regex(shownText.stdout, /\ndispatch: none/);

  // Cancelled: the list says why, and the project is clear again once the job ended.
  t.is((await cancel(t, db, running.runId)).code, 0);
  t.is((await running.job.exited).code, 143);
  const after = JSON.parse((await pidfence(['list', '--db', db, '--json', '--state', 'cancelled'])).stdout) as {
    items: ListedRun[];
  };
  t.like(after.items, [
    { runId: running.runId, status: 'cancelled', cancelReason: 'user', exit: { cause: 'receipt', signal: 'SIGTERM' } },
  ]);
  const idle = await pidfence(['status', '--project', 'default', '--db', db]);
  t.is(idle.code, 0, idle.stdout);
  t.regex(idle.stdout, /\n {2}running jobs +0\n$/);
  const cancelledShown = await pidfence(['show', running.runId, '--db', db]);
  t.regex(cancelledShown.stdout, /\n {2}reason +user\n/);
  t.regex(
    cancelledShown.stdout,
    /run\.cancel_dispatched +attemptId=\S+ result=termination_requested dispatchCount=1\n/,
  );

  assertPrivate(t, db, [
    busy,
    text,
    json,
    shownText,
    shownJson,
    cancelledShown,
    await pidfence(['show', running.runId, '--db', db, '--json']),
  ]);
});

test('list pages with --limit and the printed cursor, filters with --state, and refuses a bad state, limit or cursor as bad input', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  await grantCancelOnSqlite(db);
  const ids: string[] = [];
  for (const status of [0, 1, 0]) {
    const ran = await pidfence(['run', '--db', db, '--', 'sh', '-c', `exit ${status}`]);
    ids.unshift(/run (run-[0-9a-f-]+) started/.exec(ran.stderr)?.[1] ?? '');
  }
  const seen: string[] = [];
  let args = ['list', '--db', db, '--limit', '1'];
  for (let page = 0; page < 3; page += 1) {
    const listed = await pidfence(args);
    t.is(listed.code, 0, listed.stderr);
    seen.push(...listRows(listed.stdout).keys());
    const next = /\nnext page: pidfence list --project default --cursor (\S+)\n$/.exec(listed.stdout)?.[1];
    if (page < 2) t.truthy(next, listed.stdout);
    else t.regex(listed.stdout, /\nlast page\n$/);
    args = ['list', '--db', db, '--limit', '1', '--cursor', next ?? ''];
  }
  t.deepEqual(seen, ids);
  t.deepEqual([...listRows((await pidfence(['ps', '--db', db, '--state', 'failed'])).stdout).keys()], [ids[1]]);
  for (const [bad, code] of [
    [['--state', 'done'], 'ERR_PIDFENCE_INVALID_RUN_STATUS'],
    [['--cursor', 'rl1.nope'], 'ERR_PIDFENCE_INVALID_CURSOR'],
  ] as const) {
    const refused = await pidfence(['list', '--db', db, '--json', ...bad]);
    t.is(refused.code, 2, refused.stderr);
    t.like(JSON.parse(refused.stderr), { error: { code, category: 'input' } });
  }
  t.is((await pidfence(['list', '--db', db, '--limit', '0'])).code, 2);
});

test('show and cancel answer a run of another project exactly like a missing one, naming the store they asked', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  await grantCancelOnSqlite(db);
  const store = openSqliteStore(db);
  await store.runStore.createRun({ runId: 'run-foreign', projectId: 'other' });
  store.close();
  // The file's owner would see every project (docs/decisions/0170): root must not be it here.
  disownStore(db);
  for (const verb of ['show', 'cancel']) {
    const foreign = await pidfence([verb, 'run-foreign', '--db', db]);
    const missing = await pidfence([verb, 'run-missing', '--db', db]);
    t.is(foreign.code, 4, foreign.stderr);
    t.is(missing.code, 4);
    t.is(foreign.stderr.replace('run-foreign', 'RUN'), missing.stderr.replace('run-missing', 'RUN'), verb);
    t.is(
      missing.stderr,
      `pidfence: run run-missing is not in the store ${db}, or you do not hold run.read on its project; check the run id, --db and your grants. (ERR_PIDFENCE_RUN_NOT_FOUND)\n`,
    );
    t.false(foreign.stderr.includes('other'), 'no project named');
  }
});
