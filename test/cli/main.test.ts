// The CLI entry (docs/decisions/0041, 0042): exit status by error category, errors as JSON under
// --json, --version, and the hint to put a job's options after `--`.
import path from 'node:path';

import test from 'ava';

import { pidfence, tempDir } from './pidfence-process';

test('a garbage blocked cursor is bad input: exit 2 with its code, not a refusal', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  t.is((await pidfence(['grant', '--bootstrap', '--db', db, 'root', 'proj', 'grants.write'])).code, 0);
  t.is((await pidfence(['grant', '--db', db, 'root', 'proj', 'run.read'])).code, 0);
  const garbage = await pidfence(['blocked', '--db', db, '--project', 'proj', '--cursor', 'garbage']);
  t.is(garbage.code, 2, garbage.stderr);
  t.regex(garbage.stderr, /ERR_PIDFENCE_INVALID_CURSOR/);
  t.false(/\n\s+at /.test(garbage.stderr), 'no stack trace');
});

test('under --json an error is one JSON document on stderr with its code and category, and stdout is empty', async (t) => {
  const dir = tempDir(t);
  const missing = await pidfence(['status', '--project', 'proj', '--json', '--db', path.join(dir, 'none.db')]);
  t.is(missing.code, 3);
  t.is(missing.stdout, '');
  const parsed = JSON.parse(missing.stderr) as { error: { code: string; category: string; message: string } };
  t.like(parsed.error, { code: 'ERR_PIDFENCE_STORE_UNAVAILABLE', category: 'unavailable' });
  t.regex(parsed.error.message, /pass --db/);
});

test('pidfence --version prints the package version and exits 0', async (t) => {
  const version = await pidfence(['--version']);
  t.is(version.code, 0);
  t.regex(version.stdout, /^\d+\.\d+\.\d+\n$/);
});

test("an unknown option after `pidfence run COMMAND` hints to put the job's options after --", async (t) => {
  const dir = tempDir(t);
  const unknown = await pidfence(['run', '--db', path.join(dir, 'x.db'), 'ls', '-la']);
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /unknown option '-la'/);
  t.regex(unknown.stderr, /pidfence run \[options\] -- COMMAND/);
  const other = await pidfence(['status', '--bogus']);
  t.is(other.code, 2);
  t.false(/-- COMMAND/.test(other.stderr), 'the hint is only for commands that take a job');
});

test("under --json a usage error is JSON too: commander's text is held back, the code is ERR_PIDFENCE_USAGE", async (t) => {
  const unknown = await pidfence(['list', '--json', '--bogus']);
  t.is(unknown.code, 2);
  t.is(unknown.stdout, '');
  t.deepEqual(JSON.parse(unknown.stderr), {
    error: { code: 'ERR_PIDFENCE_USAGE', category: 'input', message: "unknown option '--bogus'" },
  });
  const jobOption = await pidfence(['run', '--json', 'ls', '-la']);
  t.is(jobOption.code, 2);
  const parsed = JSON.parse(jobOption.stderr) as { error: { code: string; message: string } };
  t.is(parsed.error.code, 'ERR_PIDFENCE_USAGE');
  t.regex(parsed.error.message, /^unknown option '-la'; hint: .*pidfence run \[options\] -- COMMAND/);
  const missing = await pidfence(['show', '--json']);
  t.like(JSON.parse(missing.stderr), { error: { code: 'ERR_PIDFENCE_USAGE' } });
});

/** Each kind of usage error in text, with the code its --json twin carries. */
const TEXT_USAGE_ERRORS: ReadonlyArray<{ args: string[]; code: string; reason: RegExp }> = [
  { args: ['list', '--bogus'], code: 'ERR_PIDFENCE_USAGE', reason: /^unknown option '--bogus'$/ },
  { args: ['show'], code: 'ERR_PIDFENCE_USAGE', reason: /^missing required argument 'run'$/ },
  { args: ['show', 'run-a', 'run-b'], code: 'ERR_PIDFENCE_USAGE', reason: /^too many arguments for 'show'/ },
  { args: ['frobnicate'], code: 'ERR_PIDFENCE_USAGE', reason: /^unknown command 'frobnicate'; run pidfence --help/ },
  { args: [], code: 'ERR_PIDFENCE_USAGE', reason: /^no command given$/ },
  { args: ['status'], code: 'ERR_PIDFENCE_USAGE', reason: /^--project <id> is required\.$/ },
  { args: ['list', '--db', 'mysql://x@y/z'], code: 'ERR_PIDFENCE_USAGE', reason: /mysql:\/\/ is not a store/ },
  {
    args: ['list', '--db', 'postgres://a:b@h:99999/d'],
    code: 'ERR_PIDFENCE_INVALID_DATABASE_URL',
    reason: /^the PostgreSQL URL is malformed/,
  },
  {
    args: ['run', '--timeout', 'soon', '--', 'true'],
    code: 'ERR_PIDFENCE_INVALID_DURATION',
    reason: /^--timeout must be a duration/,
  },
];

test('a usage error in text names its stable code on its first line, as every other text error does, and is the code --json gives', async (t) => {
  const cwd = tempDir(t);
  const env = { PIDFENCE_DB: path.join(cwd, 'none.db') };
  for (const { args, code, reason } of TEXT_USAGE_ERRORS) {
    const text = await pidfence(args, env, cwd);
    t.is(text.code, 2, `${args.join(' ')}: ${text.stderr}`);
    t.is(text.stdout, '');
    const first = text.stderr.split('\n')[0] ?? '';
    const line = /^pidfence: (.*) \((ERR_PIDFENCE_[A-Z_]+)\)$/.exec(first);
    t.truthy(line, `${args.join(' ')}: the first line is "pidfence: <reason> (<code>)": ${first}`);
    t.regex(line?.[1] ?? '', reason, args.join(' '));
    t.is(line?.[2], code, args.join(' '));
    t.false(/\n\s+at /.test(text.stderr), 'no stack trace');
    const jsonArgs = args.includes('--') ? ['run', '--json', ...args.slice(1)] : [...args, '--json'];
    const json = await pidfence(jsonArgs, env, cwd);
    t.is(json.code, 2, jsonArgs.join(' '));
    t.like(JSON.parse(json.stderr), { error: { code, category: 'input' } }, jsonArgs.join(' '));
  }
});

const COMMANDS = [
  'run',
  'cancel',
  'supervise',
  'status',
  'list',
  'show',
  'logs',
  'blocked',
  'inspect',
  'rearm',
  'grant',
  'migrate',
  'grant-runtime',
  'control-plane',
  'worker',
  'workers',
];

test('every command answers --help with its usage and exit 0; `logs --json` is not sold as JSON output (it shapes only an error)', async (t) => {
  for (const name of COMMANDS) {
    const help = await pidfence([name, '--help']);
    t.is(help.code, 0, `${name} --help: ${help.stderr}`);
    t.regex(help.stdout, new RegExp(`^Usage: pidfence ${name}`), name);
  }
  // decision 0250: the log is the job's bytes as written; --json changes only how an error is written.
  const logs = (await pidfence(['logs', '--help'])).stdout.replace(/\s+/g, ' ');
  t.notRegex(logs, /--json machine-readable output \(the same facts as the text\)/);
  t.regex(logs, /--json an error as one JSON line; the output stays the job's bytes as written/);
});
