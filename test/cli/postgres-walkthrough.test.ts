// docs/postgres.md as a DBA and an operator follow it (issue 33 items 1, 2, 6), on a throw-away
// cluster (the roles are cluster-wide names): the DBA's SQL block run verbatim, then migrate and
// grant-runtime; a refusal's hint run as printed (its placeholders filled in) makes the next read
// work; and reading with the owner's URL says to use the runtime role's URL, never to grant the owner.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';
import { Client } from 'pg';

import { packageRoot } from '../../lib/store/migrations';
import { clusterInit, clusterRemove, clusterStart, clusterUrl } from '../helpers/pg-cluster';
import { fencedBlocks, sectionOf } from '../helpers/readme-transcript';
import { pidfence } from './pidfence-process';

const GUIDE = readFileSync(path.join(packageRoot(), 'docs', 'postgres.md'), 'utf8');

/** The commands a refusal prints between backticks, placeholders filled in. */
function printedCommands(message: string, fill: Readonly<Record<string, string>>): string[][] {
  return [...message.matchAll(/`pidfence ([^`]+)`/g)].map((match) =>
    (match[1] ?? '').split(' ').map((word) => fill[word] ?? word),
  );
}

test("the DBA's SQL of docs/postgres.md, then migrate and grant-runtime, set a database up; a refusal's printed commands work; the owner's URL is refused with the runtime URL as the advice", async (t) => {
  const [sql] = fencedBlocks(sectionOf(GUIDE, "Two roles and a database (the DBA's part)"), 'sql');
  t.regex(
    sql ?? '',
    /CREATE ROLE jobs_owner LOGIN[\s\S]*CREATE ROLE jobs_runtime LOGIN[\s\S]*CREATE DATABASE jobs_demo OWNER jobs_owner/,
  );
  const cluster = await clusterInit({ label: 'guide' });
  t.teardown(() => clusterRemove(cluster));
  const port = await clusterStart(cluster);
  const admin = new Client({ connectionString: clusterUrl(cluster) });
  await admin.connect();
  // One statement at a time: CREATE DATABASE cannot run inside the implicit transaction of a multi-statement query.
  for (const statement of (sql ?? '')
    .split(';')
    .map((text) => text.trim())
    .filter((text) => text !== ''))
    await admin.query(statement);
  await admin.end();
  const ownerUrl = `postgres://jobs_owner@127.0.0.1:${port}/jobs_demo`;
  const runtimeUrl = `postgres://jobs_runtime@127.0.0.1:${port}/jobs_demo`;

  const migrated = await pidfence(['migrate', '--db', ownerUrl]);
  t.is(migrated.code, 0, migrated.stderr);
  const ready = await pidfence(['grant-runtime', 'jobs_runtime', '--db', ownerUrl]);
  t.is(ready.code, 0, ready.stderr);
  t.regex(ready.stdout, /^jobs_runtime holds exactly the runtime privileges/);

  // No grant yet: the refusal prints the commands that give one, --db and --bootstrap included.
  const refused = await pidfence(['status', '--project', 'billing', '--db', runtimeUrl]);
  t.is(refused.code, 4, refused.stderr);
  t.regex(refused.stderr, /ERR_PIDFENCE_NOT_PERMITTED/);
  const commands = printedCommands(refused.stderr, { '<migration-owner-url>': ownerUrl, '<owner-role>': 'jobs_owner' });
  t.true(commands.length >= 2 && commands.every((words) => words.includes('--db')), refused.stderr);
  t.true(
    commands.some((words) => words.includes('--bootstrap')),
    'the first grant of a database is a bootstrap',
  );
  for (const words of [...commands].reverse()) {
    const ran = await pidfence(words);
    t.is(ran.code, 0, `pidfence ${words.join(' ')}: ${ran.stderr}`);
  }
  const status = await pidfence(['status', '--project', 'billing', '--db', runtimeUrl]);
  t.is(status.code, 0, status.stderr);

  // Reading with the owner's URL: the URL is wrong, no grant fixes it.
  const asOwner = await pidfence(['status', '--project', 'billing', '--db', ownerUrl]);
  t.is(asOwner.code, 3, asOwner.stderr);
  t.regex(
    asOwner.stderr,
    /^pidfence: jobs_owner owns the pidfence tables: it is the migration owner, .*Connect with the runtime role's URL.*\(ERR_PIDFENCE_STORE_OWNER\)\n$/,
  );
  t.notRegex(asOwner.stderr, /grantRuntime\('jobs_owner'\)|grant-runtime jobs_owner/);
});
