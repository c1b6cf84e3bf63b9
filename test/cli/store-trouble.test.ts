// Issue 15 item 5: store trouble is one sentence and exit 3 for every command — missing directory,
// unwritable directory, not a database, damaged, 0 bytes — and only run, supervise and
// grant --bootstrap may create a store, with mode 0600.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  openSync,
  readSync,
  statSync,
  writeFileSync,
  writeSync,
  closeSync,
} from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { NO_PASSWD_UID, pidfence, requireRoot, tempDir, type Run } from './pidfence-process';

function oneSentence(t: import('ava').ExecutionContext, run: Run, pattern: RegExp): void {
  t.is(run.code, 3, run.stderr);
  t.regex(run.stderr, pattern);
  t.is(run.stderr.split('\n').length, 2, 'one line');
  t.false(/\n\s+at /.test(run.stderr), 'no stack trace');
}

const status = (db: string, cwd?: string): Promise<Run> =>
  pidfence(['status', '--project', 'proj', '--db', db], {}, cwd);
const runTrue = (db: string, uid?: number): Promise<Run> =>
  pidfence(['run', '--db', db, '--', 'true'], {}, undefined, uid);

test('a missing directory: status and run exit 3 with a sentence; run names the missing directory', async (t) => {
  const db = path.join(tempDir(t), 'no', 'such', 'pidfence.db');
  oneSentence(t, await status(db), /^pidfence: no pidfence database at .*ERR_PIDFENCE_STORE_UNAVAILABLE/);
  oneSentence(t, await runTrue(db), /^pidfence: the directory .* does not exist; create it/);
});

test('an unwritable directory: run exits 3 saying the directory is not writable', async (t) => {
  requireRoot('run as another user');
  const dir = tempDir(t);
  chmodSync(dir, 0o755);
  const db = path.join(dir, 'pidfence.db');
  oneSentence(
    t,
    await runTrue(db, NO_PASSWD_UID),
    /^pidfence: cannot create a database in .* not writable for this user/,
  );
});

test('a file that is not a database and a 0-byte file: exit 3 with a sentence, and the 0-byte file stays 0 bytes', async (t) => {
  const dir = tempDir(t);
  const garbage = path.join(dir, 'garbage.db');
  writeFileSync(garbage, 'this is not a database, just some text that is long enough to fill a header.'.repeat(20));
  oneSentence(
    t,
    await status(garbage),
    /^pidfence: .*garbage\.db is not a SQLite database.*ERR_PIDFENCE_STORE_CORRUPT/,
  );
  oneSentence(t, await runTrue(garbage), /is not a SQLite database/);
  const empty = path.join(dir, 'empty.db');
  writeFileSync(empty, '');
  oneSentence(t, await status(empty), /^pidfence: .*empty\.db is an empty file, not a pidfence database/);
  oneSentence(t, await runTrue(empty), /is an empty file/);
  t.is(statSync(empty).size, 0);
});

test('a partly corrupted database is never reported clear: status exits 3 naming the damage', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  t.is((await pidfence(['grant', '--bootstrap', '--db', db, 'root', 'proj', 'grants.write'])).code, 0);
  t.is((await pidfence(['grant', '--db', db, 'root', 'proj', 'run.read'])).code, 0);
  t.is((await status(db)).code, 0, 'clear before the damage');
  // Overwrite the last page (a b-tree page of some table or index) with garbage; the header stays intact.
  const pageSize = 4096;
  const size = statSync(db).size;
  t.true(size >= 3 * pageSize);
  const fd = openSync(db, 'r+');
  const header = Buffer.alloc(16);
  readSync(fd, header, 0, 16, 0);
  t.is(header.toString('latin1', 0, 15), 'SQLite format 3');
  writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, size - pageSize);
  closeSync(fd);
  oneSentence(t, await status(db), /^pidfence: .*pidfence\.db is damaged.*ERR_PIDFENCE_STORE_CORRUPT/);
});

test('status and inspect never create a store; run creates one with mode 0600', async (t) => {
  const dir = tempDir(t);
  const elsewhere = path.join(dir, 'elsewhere');
  mkdirSync(elsewhere);
  t.is((await pidfence(['status', '--project', 'proj'], {}, elsewhere)).code, 3);
  t.is((await pidfence(['inspect', 'run-1'], {}, elsewhere)).code, 3);
  t.false(existsSync(path.join(elsewhere, 'pidfence.db')), 'no stray ./pidfence.db');
  const db = path.join(dir, 'made.db');
  const made = await runTrue(db);
  t.is(made.code, 0, made.stderr);
  t.is(statSync(db).mode & 0o777, 0o600);
  for (const suffix of ['-wal', '-shm']) {
    if (existsSync(db + suffix)) t.is(statSync(db + suffix).mode & 0o777, 0o600, suffix);
  }
});

test('a receipt directory that cannot be made (a file in its place): run and supervise exit 3 with one sentence and its code, no stack trace, nothing started', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  writeFileSync(`${db}.receipts`, 'a file where the receipt directory belongs');
  const marker = path.join(dir, 'started');
  const run = await pidfence(['run', '--db', db, '--', 'touch', marker]);
  oneSentence(
    t,
    run,
    /^pidfence: cannot create the completion receipt directory .*pidfence\.db\.receipts \(ENOTDIR\).*\(ERR_PIDFENCE_RECEIPT_DIRECTORY\)$/m,
  );
  t.false(existsSync(marker), 'no job was started');
  oneSentence(t, await pidfence(['supervise', '--db', db]), /\(ERR_PIDFENCE_RECEIPT_DIRECTORY\)$/m);
});
