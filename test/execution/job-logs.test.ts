// Job logs (issue 33 item 5; docs/decisions/0250) with real processes, the real CLI and the native
// launcher: output kept for a foreground run and for a supervise-kind runner, owner-only modes,
// rotation at the cap, a runner SIGKILLed mid-job, `logs --follow`, bad input, a full disk on a small
// tmpfs, a reader that goes away, a terminal — and the output never in the store, events or metrics.
// Serial: each test starts several node processes, and together they would only slow each other down.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  statfsSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { OVERDUE_AFTER_DEFAULT_MS } from '../../lib/contract/index';
import { readExportedSummary } from '../../lib/management/index';
import { createMetrics } from '../../lib/metrics/index';
import { signalVerified } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { driverOf } from '../../lib/store/sqlite/driver';
import { disownStore, NO_PASSWD_UID, requireRoot } from '../cli/pidfence-process';
import { groupMembers, reapGroupAtEnd } from '../helpers/job-groups';
import { delay, until } from '../helpers/wait';
import { CLI, cliProcess, grantCancelOnSqlite, sqliteJobGroup, startRun, type CliRun } from './cli-runs';
import { openWorld, worldDirectory } from './world';

function cli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function runIdOf(text: string): string {
  const runId = /run (run-[0-9a-f-]+) started/.exec(text)?.[1];
  if (runId === undefined) throw new Error(`no run id in: ${text}`);
  return runId;
}

function logOf(db: string, runId: string, suffix = ''): string {
  return path.join(`${db}.logs`, `${runId}.log${suffix}`);
}

/** `pidfence run` with extra options, like startRun: its lines awaitable, its job group reaped at the end. */
async function startRunWith(
  t: ExecutionContext,
  db: string,
  options: readonly string[],
  job: readonly string[],
): Promise<CliRun> {
  const runner = cliProcess(t, ['run', '--db', db, '--grace', '300ms', ...options, '--', ...job]);
  const runId = runIdOf(await runner.waitForLine(/run (run-[0-9a-f-]+) started/, 15_000));
  const pgid = await sqliteJobGroup(db)(runId);
  reapGroupAtEnd(t, pgid);
  return { job: runner, runId, pgid };
}

/**
 * Creates the trigger files a job waits for when the test ends, whatever happened: a test that failed
 * before it could reap the job's group (its run never said "started") leaves no job waiting forever.
 */
function releaseAtEnd(t: ExecutionContext, ...triggers: string[]): void {
  t.teardown(() => {
    for (const trigger of triggers) writeFileSync(trigger, '');
  });
}

function mode(file: string): number {
  return statSync(file).mode & 0o777;
}

/** Every text a SQLite store holds, all tables. */
function storeDump(db: string): string {
  const store = openSqliteStore(db);
  try {
    const tables = driverOf(store.database)
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all() as Array<{ name: string }>;
    return JSON.stringify(tables.map(({ name }) => driverOf(store.database).prepare(`SELECT * FROM "${name}"`).all()));
  } finally {
    store.close();
  }
}

test.serial(
  'job logs: a foreground run keeps stdout and stderr in <store>.logs/<run>.log (0600 in a 0700 directory), still shows both, and pidfence logs prints them',
  (t) => {
    const at = worldDirectory(t);
    const ran = cli([
      'run',
      '--db',
      at.file,
      '--',
      'sh',
      '-c',
      'echo out-line-1; echo err-line >&2; echo out-line-2; exit 4',
    ]);
    t.is(ran.status, 4, ran.stderr);
    t.is(ran.stdout, 'out-line-1\nout-line-2\n', "the terminal still gets the job's stdout");
    t.regex(ran.stderr, /\nerr-line\n/, 'and its stderr');
    const runId = runIdOf(ran.stderr);
    const log = readFileSync(logOf(at.file, runId), 'utf8');
    t.deepEqual(log.split('\n').sort(), ['', 'err-line', 'out-line-1', 'out-line-2'], 'both streams, every line');
    t.true(log.indexOf('out-line-1') < log.indexOf('out-line-2'));
    t.is(mode(`${at.file}.logs`), 0o700);
    t.is(mode(logOf(at.file, runId)), 0o600);
    const printed = cli(['logs', runId, '--db', at.file]);
    t.is(printed.status, 0, printed.stderr);
    t.is(printed.stdout, log, 'logs prints the file byte for byte');
    t.is(printed.stderr, '');
  },
);

test.serial(
  'job logs: a supervise-kind runner (the execution lifecycle, output ignored) keeps the output too; none of it reaches the store, an event, a metric or a diagnostic',
  async (t) => {
    const at = worldDirectory(t);
    const diagnostics: string[] = [];
    const store = openSqliteStore(at.file);
    const metrics = createMetrics({
      projects: ['p1'],
      overdueAfterMs: OVERDUE_AFTER_DEFAULT_MS,
      readProject: (project) => readExportedSummary(store.managementStore, project, OVERDUE_AFTER_DEFAULT_MS),
    });
    t.teardown(() => store.close());
    const world = openWorld(t, {
      at,
      runnerKind: 'supervise',
      observer: metrics.observer,
      logs: { directory: `${at.file}.logs` },
      diagnostics: (diagnostic) => {
        diagnostics.push(JSON.stringify(diagnostic));
      },
    });
    world.app.start();
    const done = await world.app.admit({
      projectId: 'p1',
      command: 'sh',
      args: ['-c', 'echo SECRET-OUT-71c; echo SECRET-ERR-71c >&2; exit 3'],
    });
    const stopped = await world.app.admit({
      projectId: 'p1',
      command: 'sh',
      args: ['-c', 'echo SECRET-STOPPED-71c; exec sleep 30'],
    });
    if (done.kind !== 'admitted' || stopped.kind !== 'admitted') throw new Error('not admitted');
    t.like(await world.completed(done.runId), { status: 'failed' });
    await until(
      () =>
        existsSync(logOf(at.file, stopped.runId)) &&
        readFileSync(logOf(at.file, stopped.runId), 'utf8').includes('SECRET-STOPPED-71c'),
      { what: 'the second job wrote' },
    );
    await world.store.runStore.requestCancellation({
      runId: stopped.runId,
      reason: 'user',
      eventId: 'evt-logs-cancel',
    });
    world.app.lifecycle.wake();
    t.like(await world.completed(stopped.runId), { status: 'cancelled' });
    t.is(readFileSync(logOf(at.file, done.runId), 'utf8'), 'SECRET-OUT-71c\nSECRET-ERR-71c\n');
    t.is(cli(['logs', stopped.runId, '--db', at.file]).stdout, 'SECRET-STOPPED-71c\n');
    const exposition = await metrics.exposition();
    t.regex(exposition, /pidfence_stops_total\{mode="[^"]+"\} 1/, 'the metrics did see the stop');
    const seen = [
      exposition,
      storeDump(at.file),
      ...diagnostics,
      cli(['show', done.runId, '--db', at.file, '--json']).stdout,
      cli(['show', stopped.runId, '--db', at.file]).stdout,
    ].join('\n');
    t.false(seen.includes('SECRET'), 'no byte of the output outside its log');
  },
);

test.serial(
  'job logs: rotation at the cap keeps the newest output in <run>.log, .1 and .2, each at most the cap and owner-only; logs prints them oldest first',
  (t) => {
    const at = worldDirectory(t);
    // 2,000 numbered lines of 100 bytes: 200,000 bytes against a 16 KiB cap and two rotated files.
    const script = 'i=0; while [ $i -lt 2000 ]; do printf "%05d %093d\\n" $i 0; i=$((i+1)); done';
    const ran = cli(['run', '--db', at.file, '--log-max', '16k', '--log-keep', '2', '--', 'sh', '-c', script]);
    t.is(ran.status, 0, ran.stderr);
    t.is(ran.stdout.length, 200_000, 'the terminal got everything');
    const runId = runIdOf(ran.stderr);
    const files = ['.2', '.1', ''].map((suffix) => logOf(at.file, runId, suffix));
    for (const file of files) {
      t.true(existsSync(file), file);
      t.true(statSync(file).size <= 16 * 1024, `${file} is ${statSync(file).size} bytes`);
      t.is(mode(file), 0o600);
    }
    t.false(existsSync(logOf(at.file, runId, '.3')), 'no more than --log-keep rotated files');
    // A file is rotated before a chunk (at most half the cap: 8 KiB here) would pass the cap: a rotated file is more than half full.
    for (const file of files.slice(0, 2)) t.true(statSync(file).size > 16 * 1024 - 8192, `${file} rotated early`);
    const kept = files.map((file) => readFileSync(file, 'utf8')).join('');
    t.true(ran.stdout.endsWith(kept), 'the newest output, in order, with nothing lost between the files');
    t.is(cli(['logs', runId, '--db', at.file]).stdout, kept);
    t.is(cli(['run', '--db', at.file, '--log-max', '1k', '--', 'true']).status, 2, 'a cap under 16k is bad input');
  },
);

test.serial('job logs: the runner SIGKILLed mid-job, the launcher keeps writing and the log is complete', async (t) => {
  const at = worldDirectory(t);
  const trigger = path.join(at.dir, 'runner-is-gone');
  releaseAtEnd(t, trigger);
  // Ten lines, then it waits for the test to kill its runner, then ten more.
  const script = `i=1; while [ $i -le 20 ]; do echo "line $i"; [ $i -eq 10 ] && while [ ! -e ${trigger} ]; do sleep 0.05; done; i=$((i+1)); done`;
  const run = await startRun(t, at.file, sqliteJobGroup(at.file), ['sh', '-c', script]);
  await until(
    () =>
      existsSync(logOf(at.file, run.runId)) && readFileSync(logOf(at.file, run.runId), 'utf8').includes('line 10\n'),
    { timeoutMs: 15_000, what: 'the first ten lines' },
  );
  t.is(signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind, 'signalled', run.job.lines.join('\n'));
  await run.job.exited;
  writeFileSync(trigger, '');
  await until(() => groupMembers(run.pgid).length === 0, { timeoutMs: 15_000, what: 'the job and its launcher ended' });
  const lines = Array.from({ length: 20 }, (_, index) => `line ${index + 1}`);
  t.is(readFileSync(logOf(at.file, run.runId), 'utf8'), `${lines.join('\n')}\n`);
});

test.serial(
  'job logs: logs --follow prints each line as it comes, follows the log across rotations, and ends when the run ends',
  async (t) => {
    const at = worldDirectory(t);
    const trigger = (batch: number): string => path.join(at.dir, `go-on-${batch}`);
    releaseAtEnd(t, trigger(2), trigger(3));
    // Three batches of 120 lines of 98 bytes (11,760 bytes each, so the 16 KiB log rotates during the
    // second and the third); before the second and the third the job waits for the test.
    const batch = (n: number): string =>
      `i=0; while [ $i -lt 120 ]; do printf "b${n} %03d %090d\\n" $i 0; i=$((i+1)); done`;
    const wait = (n: number): string => `while [ ! -e ${trigger(n)} ]; do sleep 0.05; done`;
    const script = [batch(1), wait(2), batch(2), wait(3), batch(3)].join('; ');
    const run = await startRunWith(t, at.file, ['--log-max', '16k'], ['sh', '-c', script]);
    const follow = cliProcess(t, ['logs', '--follow', run.runId, '--db', at.file]);
    let followEnded = false;
    void follow.exited.then(() => {
      followEnded = true;
    });
    await follow.waitForLine(/^b1 119 /, 15_000);
    await delay(600);
    t.false(followEnded, 'it waits while the run goes on');
    t.false(
      follow.lines.some((line) => line.startsWith('b2')),
      'nothing of what was not yet written',
    );
    writeFileSync(trigger(2), '');
    await follow.waitForLine(/^b2 119 /, 15_000);
    writeFileSync(trigger(3), '');
    t.is((await run.job.exited).code, 0);
    t.is((await follow.exited).code, 0, 'it ended with the run');
    const expected = [1, 2, 3].flatMap((n) =>
      Array.from({ length: 120 }, (_, i) => `b${n} ${String(i).padStart(3, '0')} ${'0'.repeat(90)}`),
    );
    t.deepEqual(
      follow.lines.filter((line) => line !== ''),
      expected,
      'every line once, in order, across the rotations',
    );
    t.true(existsSync(logOf(at.file, run.runId, '.1')), 'the log did rotate');
  },
);

test.serial(
  "job logs: bad input — an unknown run, another project's run (the same refusal), a run without a log here (--no-log, or none at all); typed errors and exit codes",
  async (t) => {
    const at = worldDirectory(t);
    await grantCancelOnSqlite(at.file);
    const noLog = cli(['run', '--db', at.file, '--no-log', '--', 'sh', '-c', 'echo shown-not-kept']);
    t.is(noLog.status, 0, noLog.stderr);
    t.is(noLog.stdout, 'shown-not-kept\n', 'without a log the job writes to the terminal directly');
    const noLogId = runIdOf(noLog.stderr);
    const store = openSqliteStore(at.file);
    await store.runStore.createRun({ runId: 'run-foreign', projectId: 'other' });
    await store.runStore.createRun({ runId: 'run-before-logs', projectId: 'default' });
    store.close();
    disownStore(at.file); // the file's owner would see every project (docs/decisions/0170)
    const missing = cli(['logs', 'run-missing', '--db', at.file]);
    const foreign = cli(['logs', 'run-foreign', '--db', at.file]);
    t.is(missing.status, 4);
    t.regex(missing.stderr, /\(ERR_PIDFENCE_RUN_NOT_FOUND\)\n$/);
    t.is(foreign.status, 4);
    t.is(
      foreign.stderr.replace('run-foreign', 'RUN'),
      missing.stderr.replace('run-missing', 'RUN'),
      'a foreign run answers like a missing one',
    );
    for (const runId of [noLogId, 'run-before-logs']) {
      const none = cli(['logs', runId, '--db', at.file, '--json']);
      t.is(none.status, 4, none.stderr);
      t.is(none.stdout, '');
      const error = (JSON.parse(none.stderr) as { error: { code: string; category: string; message: string } }).error;
      t.like(error, { code: 'ERR_PIDFENCE_RUN_NO_LOG', category: 'refused' });
      t.true(error.message.includes(`${at.file}.logs`), 'it says where it looked');
    }
    t.is(cli(['logs', 'not an id!', '--db', at.file]).status, 2);
    // A log directory that cannot be made refuses the run before anything is stored or started.
    const blocked = worldDirectory(t);
    writeFileSync(`${blocked.file}.logs`, 'a file where the directory belongs');
    const refused = cli(['run', '--db', blocked.file, '--', 'touch', path.join(blocked.dir, 'started')]);
    t.is(refused.status, 3, refused.stderr);
    t.regex(
      refused.stderr,
      /cannot create the job log directory .*\(EEXIST\).*--no-log\. \(ERR_PIDFENCE_LOG_DIRECTORY\)\n$/,
    );
    t.false(existsSync(path.join(blocked.dir, 'started')));
    const blockedStore = openSqliteStore(blocked.file);
    t.teardown(() => blockedStore.close());
    t.is(
      (driverOf(blockedStore.database).prepare('SELECT COUNT(*) AS n FROM runs').get() as { n: number }).n,
      0,
      'no run stored',
    );
    t.is(cli(['run', '--db', at.file, '--log-keep', '21', '--', 'true']).status, 2);
    t.like(JSON.parse(cli(['run', '--db', at.file, '--json', '--log-max', 'lots', '--', 'true']).stderr), {
      error: { code: 'ERR_PIDFENCE_INVALID_LOG_OPTIONS', category: 'input' },
    });
  },
);

/** A 4 MiB tmpfs at a unique mount point, unmounted afterwards; without root the test fails loudly. */
function smallTmpfs(t: ExecutionContext): string {
  const mount = mkdtempSync(path.join(tmpdir(), 'pidfence-logs-full-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mount]);
  if (mounted.status !== 0) throw new Error(`this test needs root to mount a tmpfs: ${mounted.stderr.toString()}`);
  t.teardown(() => {
    // A launcher still finishing its last write keeps the mount busy: then detach it lazily.
    if (spawnSync('umount', [mount]).status !== 0) spawnSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  });
  return mount;
}

/** Fills the file system of `mount` to the last byte: fallocate the free space, then crumbs until ENOSPC. */
function fill(mount: string): void {
  const free = statfsSync(mount);
  spawnSync('fallocate', ['-l', String(Number(free.bavail) * Number(free.bsize)), path.join(mount, 'filler')]);
  const fd = openSync(path.join(mount, 'crumbs'), 'w');
  try {
    for (;;) writeSync(fd, Buffer.alloc(512));
  } catch {
    closeSync(fd); // ENOSPC: full
  }
}

test.serial(
  'job logs: a full disk (a filled 4 MiB tmpfs) never blocks or kills the job; what was dropped is marked, and output is kept again once space returns',
  async (t) => {
    const at = worldDirectory(t);
    const mount = smallTmpfs(t);
    mkdirSync(path.join(mount, 'logs'), { mode: 0o700 });
    symlinkSync(path.join(mount, 'logs'), `${at.file}.logs`); // the store beside its logs; only the logs are on the small disk
    fill(mount);
    const trigger = path.join(at.dir, 'space-is-back');
    releaseAtEnd(t, trigger);
    // 2,000 lines of 70 bytes: 140,000 bytes, twice a pipe's buffer, while nothing can be written.
    const script = `i=0; while [ $i -lt 2000 ]; do printf "filler %05d %056d\\n" $i 0; i=$((i+1)); done; echo phase-one-done; while [ ! -e ${trigger} ]; do sleep 0.05; done; echo after-space`;
    const run = await startRun(t, at.file, sqliteJobGroup(at.file), ['sh', '-c', script]);
    await run.job.waitForLine(/^phase-one-done$/, 15_000);
    t.true(groupMembers(run.pgid).length >= 2, 'the job was neither blocked nor killed');
    rmSync(path.join(mount, 'filler'));
    rmSync(path.join(mount, 'crumbs'));
    writeFileSync(trigger, '');
    t.is((await run.job.exited).code, 0, 'the run succeeded');
    const log = readFileSync(logOf(at.file, run.runId), 'utf8');
    const marker = /\n\[pidfence: (\d+) bytes of the job's output were dropped here: No space left on device\]\n/.exec(
      log,
    );
    t.truthy(marker, log.slice(0, 300));
    const beforeMarker = log.slice(0, marker?.index ?? 0);
    t.is(
      beforeMarker.length + Number(marker?.[1]),
      140_000 + 'phase-one-done\n'.length,
      'kept plus dropped is all the output before the space came back',
    );
    t.is(log.slice((marker?.index ?? 0) + (marker?.[0].length ?? 0)), 'after-space\n');
    t.true(
      run.job.lines.some((line) =>
        /^pidfence launcher: the job's log cannot take the job's output now \(No space left on device\)/.test(line),
      ),
      'the launcher said so once',
    );
    t.false(run.job.lines.some((line) => line.startsWith('pidfence launcher') && line.includes('filler')));
  },
);

test.serial(
  'job logs: a reader that goes away (| head) ends the job as without pidfence (SIGPIPE); the log keeps what came before',
  (t) => {
    const at = worldDirectory(t);
    const piped = spawnSync(
      'sh',
      ['-c', `"$0" "$1" run --db "$2" -- yes | head -n 3`, process.execPath, CLI, at.file],
      { encoding: 'utf8', timeout: 60_000 },
    );
    t.is(piped.status, 0, piped.stderr);
    t.is(piped.stdout, 'y\ny\ny\n');
    const runId = runIdOf(piped.stderr);
    const shown = JSON.parse(cli(['show', runId, '--db', at.file, '--json']).stdout) as {
      status: string;
      exit: { signal: string | null };
    };
    t.like(shown, { status: 'failed', exit: { signal: 'SIGPIPE' } });
    t.true(readFileSync(logOf(at.file, runId), 'utf8').startsWith('y\ny\ny\n'));
  },
);

test.serial(
  'job logs: on a terminal (script(1)) the job still sees one on stdout and stderr, and the log holds its bytes as written, in order',
  (t) => {
    const at = worldDirectory(t);
    const job = 'test -t 1 && echo stdout-is-a-terminal; test -t 2 && echo stderr-is-a-terminal >&2; echo last';
    const command = [process.execPath, CLI, 'run', '--db', at.file, '--', 'sh', '-c', job]
      .map((word) => `'${word.replace(/'/g, `'\\''`)}'`)
      .join(' ');
    const onTerminal = spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 60_000 });
    t.is(onTerminal.status, 0, onTerminal.stdout);
    for (const line of ['stdout-is-a-terminal', 'stderr-is-a-terminal', 'last'])
      t.true(onTerminal.stdout.includes(`${line}\r\n`), `${line} shown on the terminal`);
    const runId = runIdOf(onTerminal.stdout);
    t.is(
      readFileSync(logOf(at.file, runId), 'utf8'),
      'stdout-is-a-terminal\nstderr-is-a-terminal\nlast\n',
      'no CR added, stderr in its place',
    );
  },
);

test.serial('job logs: a log another user may not read is a typed refusal, not a crash', (t) => {
  requireRoot('read a log as another uid');
  const at = worldDirectory(t);
  const ran = cli(['run', '--db', at.file, '--', 'echo', 'owner-only']);
  const runId = runIdOf(ran.stderr);
  chmodSync(at.dir, 0o755);
  chmodSync(`${at.file}.logs`, 0o755); // the directory opened up by hand; the file stays 0600
  const reader = `const { RunLogReader } = require(${JSON.stringify(path.resolve(__dirname, '..', '..', 'lib', 'execution', 'job-log.js'))});
try { new RunLogReader(process.argv[1], process.argv[2]).open(); console.log('read'); } catch (error) { console.log(error.code); }`;
  const other = spawnSync(process.execPath, ['-e', reader, `${at.file}.logs`, runId], {
    encoding: 'utf8',
    uid: NO_PASSWD_UID,
    gid: NO_PASSWD_UID,
    timeout: 30_000,
  });
  t.is(other.stdout.trim(), 'ERR_PIDFENCE_RUN_LOG_UNREADABLE', other.stderr);
});
