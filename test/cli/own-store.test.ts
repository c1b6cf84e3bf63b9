// Issue 33 item 2 (docs/decisions/0170): on SQLite the OS user who owns the store file holds every
// grant on it, so `list`, `show` and `cancel` work on a fresh store for its owner; anyone else still
// needs grants, and every refusal ends in a command that works as printed, `--db` included.
import { chmodSync, existsSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { sqliteJobGroup, startRun } from '../execution/cli-runs';
import { disownStore, NO_PASSWD_UID, pidfence, requireRoot, tempDir } from './pidfence-process';

/** The one command quoted in backticks at the end of a refusal, as words (the tests' paths need no quoting). */
function hintedCommand(stderr: string): string[] {
  const quoted = /`(pidfence [^`]+)`/.exec(stderr)?.[1];
  if (quoted === undefined) throw new Error(`no command in: ${stderr}`);
  return quoted.split(' ').slice(1);
}

/** Opens the store file (and its -wal, -shm) to every user, so another uid can reach it at all. */
function shareStore(dir: string, db: string): void {
  chmodSync(dir, 0o777);
  for (const file of [db, `${db}-wal`, `${db}-shm`]) if (existsSync(file)) chmodSync(file, 0o666);
}

test('the owner of a fresh store lists, shows and cancels its own run without any grant', async (t) => {
  const db = path.join(tempDir(t), 'pidfence.db');
  const run = await startRun(t, db, sqliteJobGroup(db), ['sleep', '30']);
  const listed = await pidfence(['list', '--db', db, '--json']);
  t.is(listed.code, 0, listed.stderr);
  t.deepEqual(
    (JSON.parse(listed.stdout) as { items: Array<{ runId: string }> }).items.map((item) => item.runId),
    [run.runId],
  );
  const shown = await pidfence(['show', run.runId, '--db', db]);
  t.is(shown.code, 0, shown.stderr);
  t.regex(shown.stdout, new RegExp(`^run ${run.runId} \\(project default\\): running`));
  const cancelled = await pidfence(['cancel', run.runId, '--db', db]);
  t.is(cancelled.code, 0, cancelled.stderr);
  const ended = await run.job.exited;
  t.is(ended.code, 143, 'the foreground run ended by the cancel (TERM)');
  const status = await pidfence(['status', '--db', db, '--project', 'default']);
  t.is(status.code, 0, status.stderr);
});

test('another user needs grants: its refusal names a command that the owner runs as printed, and then it can read', async (t) => {
  requireRoot('run a child under another uid');
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  t.is((await pidfence(['run', '--db', db, '--', 'true'])).code, 0);
  shareStore(dir, db);
  const stranger = `uid-${NO_PASSWD_UID}`;
  const refused = await pidfence(['list', '--db', db], {}, dir, NO_PASSWD_UID);
  t.is(refused.code, 4, refused.stderr);
  t.is(
    refused.stderr,
    `pidfence: ${stranger} does not hold run.read on project default; the user who owns ${db} holds every grant on it and can run \`pidfence grant ${stranger} default run.read --db ${db}\`. (ERR_PIDFENCE_NOT_PERMITTED)\n`,
  );
  const granted = await pidfence(hintedCommand(refused.stderr));
  t.is(granted.code, 0, granted.stderr);
  t.is(granted.stdout, `${stranger} run.read on default: granted\n`);
  const listed = await pidfence(['list', '--db', db], {}, dir, NO_PASSWD_UID);
  t.is(listed.code, 0, listed.stderr);
  // The grant a stranger lacks for granting is named the same way, and --bootstrap is closed with the same cure.
  const selfGrant = await pidfence(['grant', stranger, 'default', 'run.stop', '--db', db], {}, dir, NO_PASSWD_UID);
  t.is(selfGrant.code, 4);
  t.regex(selfGrant.stderr, new RegExp(`can run \`pidfence grant ${stranger} default grants\\.write --db ${db}\``));
  const bootstrap = await pidfence(
    ['grant', '--bootstrap', stranger, 'default', 'grants.write', '--db', db],
    {},
    dir,
    NO_PASSWD_UID,
  );
  t.is(bootstrap.code, 4);
  t.regex(
    bootstrap.stderr,
    /--bootstrap is closed: the user who owns .* can run `pidfence grant uid-54321 default grants\.write --db .*`\. \(ERR_PIDFENCE_BOOTSTRAP_CLOSED\)/,
  );
  t.is((await pidfence(hintedCommand(bootstrap.stderr))).code, 0, 'the owner runs it as printed');
  t.is(
    (await pidfence(['grant', stranger, 'default', 'run.stop', '--db', db], {}, dir, NO_PASSWD_UID)).code,
    0,
    'now an administrator',
  );
});

/** A store with one finished run that root made, then gave to NO_PASSWD_UID, in a directory anyone may use. */
async function anotherUsersStore(t: ExecutionContext): Promise<{ dir: string; db: string }> {
  requireRoot('give the store file to another uid');
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  t.is((await pidfence(['run', '--db', db, '--', 'true'])).code, 0);
  chmodSync(dir, 0o777);
  disownStore(db);
  return { dir, db };
}

test('owning the file is what counts: root on a file another user owns is refused like anyone', async (t) => {
  const { dir, db } = await anotherUsersStore(t);
  const refused = await pidfence(['list', '--db', db]);
  t.is(refused.code, 4, refused.stderr);
  t.regex(refused.stderr, /^pidfence: root does not hold run\.read on project default;/);
  const owner = await pidfence(['list', '--db', db, '--json'], {}, dir, NO_PASSWD_UID);
  t.is(owner.code, 0, owner.stderr);
  t.is((JSON.parse(owner.stdout) as { items: unknown[] }).items.length, 1);
});

/** What npx sets in the environment of the command it runs (`npx pidfence …` in a project that installed it). */
const UNDER_NPX = { npm_lifecycle_event: 'npx', npm_lifecycle_script: 'pidfence' };

test('under npx a refusal names `npx pidfence grant …`, the way the user called it (a bare pidfence is not on PATH there)', async (t) => {
  const { dir, db } = await anotherUsersStore(t);
  const refused = await pidfence(['list', '--db', db], UNDER_NPX, dir);
  t.is(refused.code, 4, refused.stderr);
  t.regex(refused.stderr, new RegExp(`can run \`npx pidfence grant root default run\\.read --db ${db}\``));
  const grant = await pidfence(['grant', 'root', 'default', 'run.read', '--db', db], UNDER_NPX, dir);
  t.is(grant.code, 4, grant.stderr);
  t.regex(grant.stderr, /can run `npx pidfence grant root default grants\.write --db /);
  const ownerGrant = await pidfence(['grant', 'someone', 'default', 'run.read', '--db', db], {}, dir, NO_PASSWD_UID);
  t.is(ownerGrant.code, 0, ownerGrant.stderr);
  const bootstrap = await pidfence(
    ['grant', '--bootstrap', 'root', 'default', 'grants.write', '--db', db],
    UNDER_NPX,
    dir,
  );
  t.is(bootstrap.code, 4, bootstrap.stderr);
  t.regex(bootstrap.stderr, /--bootstrap is closed: .* can run `npx pidfence grant root default grants\.write --db /);
  const plain = await pidfence(['list', '--db', db], {}, dir);
  t.regex(plain.stderr, /can run `pidfence grant root default run\.read --db /, 'called as pidfence, it says pidfence');
});
