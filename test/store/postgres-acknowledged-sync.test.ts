// Acknowledged means durable on PostgreSQL (issue 28 item 2, docs/decisions/0010): with the database's
// default set to synchronous_commit = off, every transaction behind what pidfence tells a person or
// a caller (a grant, "cancel requested", the dispatch functions' claim and settle, a run's end)
// still commits with synchronous_commit = on. A test-only trigger records the setting in force
// inside each of those transactions. A connection that chose `off` itself keeps its choice.
import test, { type ExecutionContext } from 'ava';
import { Client } from 'pg';

import { openPostgresStore } from '../../lib/store/postgres/index';
import { handleGroup, reapGroupAtEnd } from '../helpers/job-groups';
import {
  migratedDatabaseForFile,
  runtimeUrlNamed,
  uniqueApplicationName,
  type MigratedDatabase,
} from '../helpers/pg-store';
import { receiptsDirectory } from '../helpers/temp-file';
import { untilValue } from '../helpers/wait';
import { cliProcess, grantCancelOnPostgres } from '../execution/cli-runs';
import { cliDone, runEndWithin } from '../execution/clock-runs';

const ready = migratedDatabaseForFile(test, 'pgsync').then(async (db) => {
  await db.admin.query(`ALTER DATABASE "${db.databaseName}" SET synchronous_commit = off`);
  await db.owner.query(
    `CREATE TABLE pidfence_test_commit_settings (tbl text NOT NULL, op text NOT NULL, setting text NOT NULL)`,
  );
  await db.owner.query(`CREATE FUNCTION pidfence_test_capture() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
    BEGIN
      INSERT INTO pidfence_test_commit_settings (tbl, op, setting) VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit'));
      RETURN NULL;
    END $$`);
  for (const table of ['runs', 'attempts', 'cancellation_dispatches', 'management_grants']) {
    await db.owner.query(
      `CREATE TRIGGER pidfence_test_capture AFTER INSERT OR UPDATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION pidfence_test_capture()`,
    );
  }
  return db;
});

async function captured(db: MigratedDatabase): Promise<Array<{ tbl: string; op: string; setting: string }>> {
  return (
    await db.owner.query<{ tbl: string; op: string; setting: string }>(
      'SELECT tbl, op, setting FROM pidfence_test_commit_settings',
    )
  ).rows;
}

function receiptsDir(t: ExecutionContext): string {
  return receiptsDirectory(t, 'pidfence-pgsync-');
}

test.serial(
  'postgres, database default synchronous_commit = off: a grant, "cancel requested", the claim and settle, and the run\'s end all commit with synchronous_commit = on',
  async (t) => {
    const db = await ready;
    const plain = new Client({ connectionString: db.runtimeUrl });
    await plain.connect();
    const probe = await plain.query<{ setting: string }>("SELECT current_setting('synchronous_commit') AS setting");
    await plain.end();
    t.is(probe.rows[0]?.setting, 'off', 'a plain session of this database commits without flushing');
    await db.owner.query('TRUNCATE pidfence_test_commit_settings');
    await grantCancelOnPostgres(db.ownerUrl, db.runtimeRole);
    const receipts = receiptsDir(t);
    const run = cliProcess(t, ['run', '--db', db.runtimeUrl, '--grace', '300ms', '--', 'sleep', '30'], {
      PIDFENCE_RECEIPTS: receipts,
    });
    const runId =
      /run (run-[0-9a-f-]+) started/.exec(await run.waitForLine(/run (run-[0-9a-f-]+) started/, 20_000))?.[1] ?? '';
    const handle = await untilValue(
      async () =>
        (await db.owner.query<{ handle: string | null }>('SELECT handle FROM attempts WHERE run_id = $1', [runId]))
          .rows[0]?.handle ?? undefined,
    );
    reapGroupAtEnd(t, handleGroup(handle));
    const cancelled = await cliDone(t, ['cancel', '--db', db.runtimeUrl, runId], { PIDFENCE_RECEIPTS: receipts });
    t.is(cancelled.code, 0, cancelled.lines.join('\n'));
    const end = await runEndWithin({ job: run, runId, startedAt: performance.now() }, 15_000);
    t.is(end?.status, 'cancelled', run.lines.join('\n'));
    const rows = await captured(db);
    for (const table of ['runs', 'attempts', 'cancellation_dispatches', 'management_grants']) {
      t.true(
        rows.some((row) => row.tbl === table),
        `a write of ${table} was seen`,
      );
    }
    t.deepEqual(
      rows.filter((row) => row.setting !== 'on'),
      [],
      'every one of them committed with synchronous_commit = on',
    );
  },
);

test.serial('postgres: a connection that chose synchronous_commit = off itself keeps its choice', async (t) => {
  const db = await ready;
  await db.owner.query('TRUNCATE pidfence_test_commit_settings');
  const store = await openPostgresStore(
    runtimeUrlNamed(db, uniqueApplicationName('pidfence_sync'), { synchronous_commit: 'off' }),
    { maxConnections: 1 },
  );
  t.teardown(() => store.close());
  await store.runStore.createRun({ runId: 'run-own-choice', projectId: 'p1' });
  const rows = await captured(db);
  t.true(rows.length > 0);
  t.deepEqual([...new Set(rows.map((row) => row.setting))], ['off']);
});
