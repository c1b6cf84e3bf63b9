// docs/decisions/0044: on SQLite the principal is the OS user running the command; a uid without a
// passwd entry (common in containers) is `uid-N`, never a stack trace.
import { chmodSync, existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { NO_PASSWD_UID, pidfence, requireRoot, tempDir } from './pidfence-process';

test("a uid with no passwd entry acts as uid-N: it owns the store it creates, and is refused by that name on another's store without a stack trace", async (t) => {
  requireRoot('run a child under a uid without a passwd entry');
  const dir = tempDir(t);
  chmodSync(dir, 0o777);
  const own = path.join(dir, 'own.db');
  const bootstrap = await pidfence(
    ['grant', '--bootstrap', '--db', own, `uid-${NO_PASSWD_UID}`, 'proj', 'grants.write', '--json'],
    {},
    dir,
    NO_PASSWD_UID,
  );
  t.is(bootstrap.code, 0, bootstrap.stderr);
  t.like(JSON.parse(bootstrap.stdout), { by: `uid-${NO_PASSWD_UID}` });
  const ownStatus = await pidfence(['status', '--db', own, '--project', 'proj'], {}, dir, NO_PASSWD_UID);
  t.is(ownStatus.code, 0, ownStatus.stderr);
  // root's store, readable and writable by all: uid-N is not its owner, so it needs grants.
  const roots = path.join(dir, 'roots.db');
  t.is((await pidfence(['run', '--db', roots, '--', 'true'])).code, 0);
  for (const file of [roots, `${roots}-wal`, `${roots}-shm`]) if (existsSync(file)) chmodSync(file, 0o666);
  const status = await pidfence(['status', '--db', roots, '--project', 'proj'], {}, dir, NO_PASSWD_UID);
  t.is(status.code, 4);
  t.regex(status.stderr, new RegExp(`^pidfence: uid-${NO_PASSWD_UID} does not hold run\\.read on project proj`));
  t.false(/\n\s+at /.test(status.stderr), 'no stack trace');
});
