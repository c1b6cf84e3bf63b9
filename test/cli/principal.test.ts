// docs/decisions/0044: on SQLite the principal is the OS user running the command; a uid without a
// passwd entry (common in containers) is `uid-N`, never a stack trace.
import { execFile } from 'node:child_process';
import { chmodSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { MAIN, tempDir, type Run } from './pidfence-process';

const NO_PASSWD_UID = 54_321;

function pidfenceAsUid(uid: number, args: readonly string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { cwd, uid, gid: uid, env: { PATH: process.env.PATH ?? '' }, timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

test('a uid with no passwd entry acts as uid-N: it can bootstrap, and is refused by that name without a stack trace', async (t) => {
  if (process.getuid?.() !== 0) {
    t.pass('needs root to run a child under a uid without a passwd entry (the suite runs as root)');
    return;
  }
  const dir = tempDir(t);
  chmodSync(dir, 0o777);
  const db = path.join(dir, 'pidfence.db');
  const bootstrap = await pidfenceAsUid(NO_PASSWD_UID, ['grant', '--bootstrap', '--db', db, `uid-${NO_PASSWD_UID}`, 'proj', 'grants.write', '--json'], dir);
  t.is(bootstrap.code, 0, bootstrap.stderr);
  t.like(JSON.parse(bootstrap.stdout), { by: `uid-${NO_PASSWD_UID}` });
  const status = await pidfenceAsUid(NO_PASSWD_UID, ['status', '--db', db, '--project', 'proj'], dir);
  t.is(status.code, 4);
  t.regex(status.stderr, new RegExp(`^pidfence: uid-${NO_PASSWD_UID} does not hold run\\.read on project proj`));
  t.false(/\n\s+at /.test(status.stderr), 'no stack trace');
});
