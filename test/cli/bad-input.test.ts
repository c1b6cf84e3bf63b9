// Bad input through the real binary (issue 33 item 6; docs/decisions/0225, 0226): a malformed
// postgres:// URL, another URL scheme and an unknown command are usage errors (exit 2, one sentence,
// or one JSON error under --json); a store this user cannot write is still read by status, list,
// show and blocked, and nothing is written to it; a duration's bare number is seconds, and a run
// that timed out exits 124 whatever ended it.
import { chmodSync, chownSync, copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { NO_PASSWD_UID, pidfence, requireRoot, tempDir, type Run } from './pidfence-process';

/** One line saying why and its code, then the usage (docs/cli.md, exit 2). */
function usageError(t: import('ava').ExecutionContext, run: Run, sentence: RegExp, code: string): void {
  t.is(run.code, 2, run.stderr);
  t.is(run.stdout, '');
  const [first, ...rest] = run.stderr.split('\n');
  const suffix = ` (${code})`;
  t.true(first?.endsWith(suffix), `the reason ends with its code ${code}: ${first}`);
  t.regex(first?.slice(0, -suffix.length) ?? '', sentence);
  t.true(
    rest.every((line) => line === '' || /^Usage: pidfence |^\(run pidfence /.test(line)),
    run.stderr,
  );
}

function jsonError(t: import('ava').ExecutionContext, run: Run, code: string): string {
  t.is(run.code, 2, run.stderr);
  t.is(run.stdout, '');
  const parsed = JSON.parse(run.stderr) as { error: { code: string; category: string; message: string } };
  t.like(parsed.error, { code, category: 'input' });
  return parsed.error.message;
}

test('a malformed postgres:// URL is a usage error (exit 2) that never repeats the URL, not "check that the server is up"', async (t) => {
  const cwd = tempDir(t);
  for (const url of [
    'postgres://alice:s3cret@[bad/jobs',
    'postgres://alice:s3cret@db.example:99999/jobs',
    'postgresql://alice:s3cret@db.example:port/jobs',
    'postgres://alice:s3cret@db.example:0/jobs',
  ]) {
    const text = await pidfence(['status', '--project', 'p', '--db', url], {}, cwd);
    usageError(
      t,
      text,
      /^pidfence: the PostgreSQL URL is malformed: write it as postgres:\/\/user:password@host:port\/database, .*\.$/,
      'ERR_PIDFENCE_INVALID_DATABASE_URL',
    );
    t.false(text.stderr.includes('s3cret'), 'the password is never printed');
    const json = await pidfence(['list', '--json', '--db', url], {}, cwd);
    t.regex(jsonError(t, json, 'ERR_PIDFENCE_INVALID_DATABASE_URL'), /malformed/);
    t.false(json.stderr.includes('s3cret'));
  }
});

test('another URL scheme (mysql://, sqlite://) is a usage error, never a relative file name', async (t) => {
  const cwd = tempDir(t);
  for (const db of ['mysql://x@y/z', 'sqlite:///tmp/x.db']) {
    const scheme = db.slice(0, db.indexOf('://'));
    usageError(
      t,
      await pidfence(['status', '--project', 'p', '--db', db], {}, cwd),
      new RegExp(
        `^pidfence: --db \\(or PIDFENCE_DB\\) takes a SQLite file path or a postgres:// URL; ${scheme}:// is not a store pidfence can use\\.$`,
      ),
      'ERR_PIDFENCE_USAGE',
    );
    usageError(
      t,
      await pidfence(['run', '--', 'true'], { PIDFENCE_DB: db }, cwd),
      new RegExp(`${scheme}:// is not a store`),
      'ERR_PIDFENCE_USAGE',
    );
    jsonError(t, await pidfence(['show', 'run-x', '--json', '--db', db], {}, cwd), 'ERR_PIDFENCE_USAGE');
  }
  t.deepEqual(readdirSync(cwd), [], 'no file or folder named after the URL was made');
});

test('an unknown command is one sentence, or one JSON error with --json before or after it; --json before a known command works', async (t) => {
  const cwd = tempDir(t);
  for (const args of [
    ['--json', 'frobnicate'],
    ['frobnicate', '--json'],
  ]) {
    t.is(
      jsonError(t, await pidfence(args, {}, cwd), 'ERR_PIDFENCE_USAGE'),
      "unknown command 'frobnicate'; run pidfence --help for the commands.",
    );
  }
  const text = await pidfence(['frobnicate'], {}, cwd);
  t.is(text.code, 2);
  t.is(
    text.stderr,
    "pidfence: unknown command 'frobnicate'; run pidfence --help for the commands. (ERR_PIDFENCE_USAGE)\n",
  );
  const db = path.join(cwd, 'pidfence.db');
  t.is((await pidfence(['run', '--db', db, '--', 'true'], {}, cwd)).code, 0);
  const listed = await pidfence(['--json', 'list', '--db', db], {}, cwd);
  t.is(listed.code, 0, listed.stderr);
  t.is((JSON.parse(listed.stdout) as { items: unknown[] }).items.length, 1);
});

/** A store with one finished run, made as root; returns the run id. */
async function storeWithOneRun(t: import('ava').ExecutionContext, db: string): Promise<string> {
  const made = await pidfence(['run', '--db', db, '--json', '--', 'true']);
  t.is(made.code, 0, made.stderr);
  return (JSON.parse(made.stdout) as { runId: string }).runId;
}

test('a read-only store (0444, in a directory its reader cannot write: a backup, a forensic copy) is read by status, list, show and blocked, and nothing is written', async (t) => {
  requireRoot('read the store as another uid');
  const source = path.join(tempDir(t), 'pidfence.db');
  const runId = await storeWithOneRun(t, source);
  // The copy belongs to the reader (so it holds every grant on it, docs/decisions/0170), but neither the
  // file nor its directory is writable for it. A second copy is read-only in a directory it may write.
  const lockedDir = tempDir(t);
  const ownDir = tempDir(t);
  chownSync(ownDir, NO_PASSWD_UID, NO_PASSWD_UID);
  for (const dir of [lockedDir, ownDir]) {
    const copy = path.join(dir, 'copy.db');
    copyFileSync(source, copy);
    chownSync(copy, NO_PASSWD_UID, NO_PASSWD_UID);
    chmodSync(copy, 0o444);
    chmodSync(dir, 0o755);
    const before = readFileSync(copy);
    const as = (args: readonly string[]) => pidfence([...args, '--db', copy], {}, dir, NO_PASSWD_UID);
    const status = await as(['status', '--project', 'default', '--json']);
    t.is(status.code, 0, status.stderr);
    t.like(JSON.parse(status.stdout), { projectId: 'default', assessment: 'clear', running: 0 });
    const list = await as(['list', '--json']);
    t.is(list.code, 0, list.stderr);
    t.deepEqual(
      (JSON.parse(list.stdout) as { items: Array<{ runId: string; status: string }> }).items.map((item) => [
        item.runId,
        item.status,
      ]),
      [[runId, 'succeeded']],
    );
    const show = await as(['show', runId]);
    t.is(show.code, 0, show.stderr);
    t.regex(show.stdout, new RegExp(`^run ${runId} \\(project default\\): succeeded\\n`));
    const blocked = await as(['blocked', '--project', 'default', '--json']);
    t.is(blocked.code, 0, blocked.stderr);
    t.deepEqual((JSON.parse(blocked.stdout) as { items: unknown[] }).items, []);
    t.deepEqual(readdirSync(dir), ['copy.db'], 'no -wal or -shm beside it');
    t.true(readFileSync(copy).equals(before), 'the file is unchanged');
    // A writing command is refused (the run has finished, or the store cannot be written), in one line.
    const cancel = await as(['cancel', runId]);
    t.true(cancel.code === 3 || cancel.code === 4, cancel.stderr);
    t.is(cancel.stderr.split('\n').length, 2, cancel.stderr);
    t.true(readFileSync(copy).equals(before), 'the file is still unchanged');
  }
  t.false(existsSync(path.join(lockedDir, 'copy.db-wal')));
});

test("a duration's bare number is seconds, as the help says; a timed-out run exits 124 also when TERM ended the job", async (t) => {
  const cwd = tempDir(t);
  const help = await pidfence(['run', '--help'], {}, cwd);
  t.regex(
    help.stdout.replace(/\s+/g, ' '),
    /--timeout <duration> .*exit 124: 500ms, 30s, 5m, 2h; a number alone is seconds/,
  );
  const db = path.join(cwd, 'pidfence.db');
  const timedOut = await pidfence([
    'run',
    '--db',
    db,
    '--timeout',
    '1',
    '--grace',
    '300ms',
    '--json',
    '--',
    'sleep',
    '30',
  ]);
  t.is(timedOut.code, 124, timedOut.stderr);
  const report = JSON.parse(timedOut.stdout) as { runId: string };
  t.like(report, { status: 'timed_out', exitStatus: 124, exit: { signal: 'SIGTERM' } });
  const shown = JSON.parse((await pidfence(['show', report.runId, '--db', db, '--json'])).stdout) as {
    attempts: Array<{ createdAtMs: number; deadlineAtMs: number }>;
  };
  t.is(
    (shown.attempts[0]?.deadlineAtMs ?? 0) - (shown.attempts[0]?.createdAtMs ?? 0),
    1_000,
    '--timeout 1 is one second',
  );
  usageError(
    t,
    await pidfence(['run', '--db', db, '--timeout', '5 minutes', '--', 'true'], {}, cwd),
    /^pidfence: --timeout must be a duration such as 500ms, 30s, 5m or 2h \(a number alone is seconds\)\.$/,
    'ERR_PIDFENCE_INVALID_DURATION',
  );
});

test('worker --job-nice out of range or not a number is a usage error before any file is read or made (docs/decisions/0441)', async (t) => {
  const cwd = tempDir(t);
  const worker = (nice: string) =>
    pidfence(
      [
        'worker',
        '--control-plane',
        'https://127.0.0.1:9',
        '--cert',
        'c.pem',
        '--key',
        'k.pem',
        '--ca',
        'ca.pem',
      ].concat(['--journal', path.join(cwd, 'w.db'), '--job-nice', nice]),
      {},
      cwd,
    );
  for (const nice of ['20', '-1', '1.5', 'low']) {
    usageError(
      t,
      await worker(nice),
      new RegExp(
        `^pidfence: jobNice \\(--job-nice\\) must be a whole number from 0 to 19: .*; you gave ${nice.replace('.', '\\.')}\\.$`,
      ),
      'ERR_PIDFENCE_INVALID_JOB_NICE',
    );
  }
  // A good value goes on to the next check: the missing certificate, not the nice.
  const missingCert = await worker('10');
  t.not(missingCert.code, 0);
  t.false(missingCert.stderr.includes('JOB_NICE'), missingCert.stderr);
  t.deepEqual(readdirSync(cwd), [], 'no journal was made');
});
