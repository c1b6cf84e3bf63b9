// Run names (issue 33 item 5; docs/decisions/0251) through the real `pidfence` binary on a real SQLite
// file: `run --name` stored with the run and shown by list, show, their --json, run --json and the
// status page; a bad name refused before anything is stored, by the CLI and by the store itself.
import { existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { ManagementPlane } from '../../lib/management/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { driverOf } from '../../lib/store/sqlite/driver';
import { answerStatusPage } from '../../lib/web/status-page';
import { pidfence, tempDir } from './pidfence-process';

/** The code of what `work` throws (better-sqlite3 throws an error-like object ava does not take for an Error). */
function codeOf(work: () => unknown): string | undefined {
  try {
    work();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

function runIdOf(text: string): string {
  return /run (run-[0-9a-f-]+) started/.exec(text)?.[1] ?? '';
}

test('run names: run --name is stored with the run and shown by list, show, their --json, run --json and the status page', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  const named = await pidfence(['run', '--db', db, '--name', 'nightly-backup@db1', '--json', '--', 'true']);
  t.is(named.code, 0, named.stderr);
  const report = JSON.parse(named.stdout) as { runId: string; name: string | null };
  t.is(report.name, 'nightly-backup@db1');
  const plain = await pidfence(['run', '--db', db, '--', 'true']);
  const plainId = runIdOf(plain.stderr);

  const list = await pidfence(['list', '--db', db]);
  t.regex(list.stdout, new RegExp(`\\n {2}${report.runId} +nightly-backup@db1 +succeeded `));
  t.regex(list.stdout, new RegExp(`\\n {2}${plainId} +- +succeeded `), 'a run without a name shows -');
  const listed = JSON.parse((await pidfence(['ps', '--db', db, '--json'])).stdout) as {
    items: Array<{ runId: string; name: string | null }>;
  };
  t.deepEqual(
    listed.items.map((item) => [item.runId, item.name]),
    [
      [plainId, null],
      [report.runId, 'nightly-backup@db1'],
    ],
  );
  t.regex((await pidfence(['show', report.runId, '--db', db])).stdout, /\n {2}name +nightly-backup@db1\n/);
  t.like(JSON.parse((await pidfence(['show', report.runId, '--db', db, '--json'])).stdout), {
    runId: report.runId,
    name: 'nightly-backup@db1',
  });

  const store = openSqliteStore(db);
  t.teardown(() => store.close());
  await store.managementStore.writeGrant({ subject: 'viewer', projectId: 'default', permission: 'run.read' }, 'test');
  const planeOf = () => new ManagementPlane({ store: store.managementStore, principal: 'viewer' });
  const runs = await answerStatusPage('/status/projects/default/runs', planeOf);
  t.regex(runs.body, new RegExp(`${report.runId}</a></td><td data-name>nightly-backup@db1</td>`));
  t.regex(runs.body, /<th>run<\/th><th>name<\/th>/);
  const page = await answerStatusPage(`/status/runs/${report.runId}`, planeOf);
  t.regex(page.body, /<td data-fact="name">nightly-backup@db1<\/td>/);
});

test('run names: a bad name is bad input (exit 2) before anything is stored or started, and the store refuses one too', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  const marker = path.join(dir, 'started');
  for (const bad of [
    '',
    'x'.repeat(65),
    'two words',
    '-leading-dash',
    'semi;colon',
    '<b>',
    'name/with/slash',
    'naïve',
  ]) {
    const refused = await pidfence(['run', '--db', db, '--name', bad, '--json', '--', 'touch', marker]);
    t.is(refused.code, 2, `${JSON.stringify(bad)}: ${refused.stderr}`);
    t.like(JSON.parse(refused.stderr), { error: { code: 'ERR_PIDFENCE_INVALID_RUN_NAME', category: 'input' } });
  }
  t.false(existsSync(marker), 'no job was started');
  t.is((await pidfence(['run', '--db', db, '--name', 'x'.repeat(64), '--', 'true'])).code, 0, '64 characters are fine');
  const store = openSqliteStore(db);
  t.teardown(() => store.close());
  t.is(
    (driverOf(store.database).prepare('SELECT COUNT(*) AS n FROM runs').get() as { n: number }).n,
    1,
    'only the good one was stored',
  );
  await t.throwsAsync(
    () => store.runStore.createRun({ runId: 'run-bad-name', projectId: 'default', name: 'bad name' }),
    { code: 'ERR_PIDFENCE_INVALID_RUN_NAME' },
  );
  const insert = driverOf(store.database).prepare(
    "INSERT INTO runs (id, project_id, owner, status, version, next_event_seq, created_at_ms, updated_at_ms, name) VALUES (?, 'default', 'runtime', 'queued', 0, 1, 0, 0, ?)",
  );
  for (const bad of ['bad name', '<b>', '', 'x'.repeat(65), '.dot-first']) {
    t.is(
      codeOf(() => insert.run(`run-sql-${bad.length}`, bad)),
      'SQLITE_CONSTRAINT_CHECK',
      bad,
    );
  }
  t.is(insert.run('run-sql-good', 'good.name:1').changes, 1);
});
