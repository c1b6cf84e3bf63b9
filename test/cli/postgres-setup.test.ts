// Issue 15 item 8: PostgreSQL set up from the CLI against a throw-away cluster with password auth:
// `migrate` with the owner's URL, `grant-runtime`, then `status` as the runtime role; and one short
// sentence each for a wrong password, an unknown user, a missing database and a superuser URL.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';
import { Client } from 'pg';

import { clusterInit, clusterRemove, clusterStart, clusterUrl } from '../helpers/pg-cluster';
import { migratedDatabase } from '../helpers/pg-store';
import { pidfence, type Run } from './pidfence-process';

const SHORT_SENTENCE_MAX = 400;

function oneShortSentence(t: import('ava').ExecutionContext, run: Run, code: string, advice: RegExp): void {
  t.is(run.code, 3, run.stderr);
  t.is(run.stderr.split('\n').length, 2, 'one line');
  t.true(run.stderr.length < SHORT_SENTENCE_MAX, `${run.stderr.length} characters`);
  t.true(run.stderr.includes(`(${code})`), run.stderr);
  t.regex(run.stderr, advice);
  t.false(/secret-/.test(run.stderr), 'no password in the message');
}

test('migrate and grant-runtime set up PostgreSQL from the CLI; wrong password, unknown user, missing database and a superuser URL each get one short sentence', async (t) => {
  const cluster = await clusterInit({ label: 'password' });
  t.teardown(() => clusterRemove(cluster));
  const port = await clusterStart(cluster);
  const admin = new Client({ connectionString: clusterUrl(cluster) });
  await admin.connect();
  await admin.query("ALTER ROLE postgres PASSWORD 'secret-super'");
  await admin.query("CREATE ROLE app_owner LOGIN PASSWORD 'secret-owner'");
  await admin.query("CREATE ROLE app_runtime LOGIN PASSWORD 'secret-runtime'");
  await admin.query('CREATE DATABASE app OWNER app_owner');
  // From now on TCP logins need a password (SCRAM); the reload applies it to new connections.
  writeFileSync(
    path.join(cluster.dataDir, 'pg_hba.conf'),
    'local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n',
  );
  await admin.query('SELECT pg_reload_conf()');
  await admin.end();
  const url = (user: string, password: string, database = 'app'): string =>
    `postgres://${user}:${password}@127.0.0.1:${port}/${database}`;
  const ownerUrl = url('app_owner', 'secret-owner');
  const runtimeUrl = url('app_runtime', 'secret-runtime');

  const migrated = await pidfence(['migrate', '--db', ownerUrl, '--json']);
  t.is(migrated.code, 0, migrated.stderr);
  t.true((JSON.parse(migrated.stdout) as { applied: string[] }).applied.length >= 5);
  t.is((await pidfence(['migrate', '--db', ownerUrl])).stdout, 'the schema is up to date; nothing to apply\n');
  const granted = await pidfence(['grant-runtime', 'app_runtime', '--db', ownerUrl]);
  t.is(granted.code, 0, granted.stderr);
  t.regex(granted.stdout, /^app_runtime holds exactly the runtime privileges/);
  t.is((await pidfence(['grant', '--bootstrap', '--db', ownerUrl, 'app_owner', 'proj', 'grants.write'])).code, 0);
  t.is((await pidfence(['grant', '--db', ownerUrl, 'app_runtime', 'proj', 'run.read'])).code, 0);
  const status = await pidfence(['status', '--project', 'proj', '--db', runtimeUrl]);
  t.is(status.code, 0, status.stderr);

  oneShortSentence(
    t,
    await pidfence(['status', '--project', 'proj', '--db', url('app_runtime', 'secret-wrong')]),
    'ERR_PIDFENCE_STORE_AUTH',
    /user name or password in the URL is wrong/,
  );
  oneShortSentence(
    t,
    await pidfence(['migrate', '--db', url('nobody', 'secret-x')]),
    'ERR_PIDFENCE_STORE_AUTH',
    /user name or password/,
  );
  oneShortSentence(
    t,
    await pidfence(['migrate', '--db', url('app_owner', 'secret-owner', 'nosuchdb')]),
    'ERR_PIDFENCE_STORE_NO_DATABASE',
    /Create it \(createdb/,
  );
  oneShortSentence(
    t,
    await pidfence(['status', '--project', 'proj', '--db', url('postgres', 'secret-super')]),
    'ERR_PIDFENCE_STORE_SUPERUSER',
    /is a superuser.*runtime role's URL/,
  );
});

test('grant-runtime for a role that does not exist (SQLSTATE 42704): one sentence saying to create it, exit 3 by its category, nothing granted', async (t) => {
  const db = await migratedDatabase('grant_runtime_missing');
  t.teardown(() => db.dispose());
  for (const args of [[], ['--json']]) {
    const run = await pidfence(['grant-runtime', 'pidfence_no_such_role', '--db', db.ownerUrl, ...args]);
    t.is(run.code, 3, run.stderr);
    t.is(run.stdout, '');
    const message =
      args.length === 0
        ? run.stderr
        : (JSON.parse(run.stderr) as { error: { code: string; category: string; message: string } }).error.message;
    t.regex(
      message,
      /the role pidfence_no_such_role does not exist on this server; create it first \(CREATE ROLE pidfence_no_such_role LOGIN PASSWORD/,
    );
    if (args.length === 0) {
      t.is(run.stderr.split('\n').length, 2, 'one line');
      t.true(run.stderr.includes('(ERR_PIDFENCE_PG_ROLE_MISSING)'), run.stderr);
      t.false(/42704|disk|locks/.test(run.stderr), 'no raw SQLSTATE advice');
    } else {
      t.like(JSON.parse(run.stderr), { error: { code: 'ERR_PIDFENCE_PG_ROLE_MISSING', category: 'unavailable' } });
    }
  }
});
