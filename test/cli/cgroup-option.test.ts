// `pidfence run --cgroup <dir>|off` (issue 27, docs/decisions/0301): a relative path, a missing
// directory and a directory outside cgroup v2 are each refused with their own code and a sentence
// that says what to do, before anything is written (no store, no run, no directory made); the
// option wins over PIDFENCE_CGROUP, both ways.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { CGROUP_SUBTREE_HANDLE_MAX_BYTES } from '../../lib/base/limits';
import { cgroup2Mount } from '../../lib/process/job-cgroup';
import { cgroupUnavailable, testSubtree } from '../helpers/cgroup';
import { pidfence, tempDir, type Run } from './pidfence-process';

const skip = cgroupUnavailable();
const cgroupTest = skip === null ? test : test.skip;

function refused(t: ExecutionContext, run: Run, code: string, sentence: RegExp): void {
  t.is(run.code, 2, run.stderr);
  t.is(run.stdout, '');
  const parsed = JSON.parse(run.stderr) as { error: { code: string; category: string; message: string } };
  t.like(parsed.error, { code, category: 'input' });
  t.regex(parsed.error.message, sentence);
  t.regex(parsed.error.message, /name a delegated cgroup2 directory with --cgroup or PIDFENCE_CGROUP, or 'off'/);
}

async function runWith(cwd: string, cgroup: string, env: Record<string, string> = {}): Promise<Run> {
  return pidfence(['run', '--json', '--db', path.join(cwd, 'store.db'), '--cgroup', cgroup, '--', 'true'], env, cwd);
}

test('--cgroup with a relative path is refused (ERR_PIDFENCE_INVALID_CGROUP); nothing is written', async (t) => {
  const cwd = tempDir(t);
  refused(t, await runWith(cwd, 'jobs/pidfence'), 'ERR_PIDFENCE_INVALID_CGROUP', /'jobs\/pidfence' is a relative path/);
  t.deepEqual(readdirSync(cwd), [], 'no store, no run, no directory');
});

test('--cgroup naming a directory outside cgroup v2 is refused (ERR_PIDFENCE_CGROUP_NOT_CGROUP2)', async (t) => {
  const cwd = tempDir(t);
  refused(t, await runWith(cwd, cwd), 'ERR_PIDFENCE_CGROUP_NOT_CGROUP2', /is not in a cgroup v2 filesystem/);
  t.deepEqual(readdirSync(cwd), []);
});

cgroupTest(
  '--cgroup naming a missing directory is refused (ERR_PIDFENCE_CGROUP_MISSING) and the directory is not made',
  async (t) => {
    const cwd = tempDir(t);
    const missing = path.join(cgroup2Mount() ?? '/', `pidfence-test-missing-${process.pid}`);
    refused(t, await runWith(cwd, missing), 'ERR_PIDFENCE_CGROUP_MISSING', /does not exist \(mkdir it first\)/);
    t.false(existsSync(missing));
    t.deepEqual(readdirSync(cwd), []);
  },
);

test('a bad PIDFENCE_CGROUP is refused the same way when no --cgroup is given', async (t) => {
  const cwd = tempDir(t);
  const run = await pidfence(
    ['run', '--json', '--db', path.join(cwd, 'store.db'), '--', 'true'],
    { PIDFENCE_CGROUP: 'relative' },
    cwd,
  );
  refused(t, run, 'ERR_PIDFENCE_INVALID_CGROUP', /'relative' is a relative path/);
  t.deepEqual(readdirSync(cwd), []);
});

async function containmentOf(t: ExecutionContext, cwd: string, run: Run): Promise<string> {
  t.is(run.code, 0, run.stderr);
  const { runId } = JSON.parse(run.stdout) as { runId: string };
  const shown = await pidfence(['show', '--json', '--db', path.join(cwd, 'store.db'), runId], {}, cwd);
  const detail = JSON.parse(shown.stdout) as { attempts: Array<{ containment: string }> };
  return detail.attempts[0]?.containment ?? '';
}

test('--cgroup off wins over a PIDFENCE_CGROUP that could not be used: the job runs in group containment', async (t) => {
  const cwd = tempDir(t);
  const run = await runWith(cwd, 'off', { PIDFENCE_CGROUP: 'relative' });
  t.is(await containmentOf(t, cwd, run), 'group');
});

cgroupTest('--cgroup <dir> wins over PIDFENCE_CGROUP=off: the job is born in a cgroup of that subtree', async (t) => {
  const cwd = tempDir(t);
  const subtree = testSubtree(t, 'option');
  const run = await runWith(cwd, subtree, { PIDFENCE_CGROUP: 'off' });
  t.is(await containmentOf(t, cwd, run), 'cgroup');
  t.deepEqual(
    readdirSync(subtree, { withFileTypes: true }).filter((entry) => entry.isDirectory()),
    [],
    'its cgroup was removed at its end',
  );
});

test('--cgroup naming a subtree longer than a job handle can name is refused (ERR_PIDFENCE_INVALID_CGROUP); nothing is written', async (t) => {
  const cwd = tempDir(t);
  const long = `/sys/fs/cgroup/${'d'.repeat(CGROUP_SUBTREE_HANDLE_MAX_BYTES)}`;
  refused(t, await runWith(cwd, long), 'ERR_PIDFENCE_INVALID_CGROUP', /longer than a job's handle can name/);
  t.deepEqual(readdirSync(cwd), []);
});

test('supervise --cgroup: a bad subtree is refused the same way before the store is opened; nothing is written', async (t) => {
  const cwd = tempDir(t);
  const db = path.join(cwd, 'store.db');
  refused(
    t,
    await pidfence(['supervise', '--json', '--db', db, '--cgroup', 'jobs'], {}, cwd),
    'ERR_PIDFENCE_INVALID_CGROUP',
    /'jobs' is a relative path/,
  );
  t.deepEqual(readdirSync(cwd), [], 'no store');
});

test('--cgroup with --control-plane is a usage error for run (the worker decides)', async (t) => {
  const cwd = tempDir(t);
  const run = await pidfence(
    ['run', '--json', '--control-plane', 'https://127.0.0.1:1', '--cgroup', '/sys/fs/cgroup', '--', 'true'],
    {},
    cwd,
  );
  t.is(run.code, 2, run.stderr);
  t.regex(run.stderr, /ERR_PIDFENCE_USAGE/);
});
