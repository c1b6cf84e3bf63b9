// The execution verbs of the CLI as real child processes on a real SQLite file (issue 07 item 7).
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { createExecution } from '../../lib/execution/index';
import { signalVerified } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { spawnJob } from '../helpers/processes';
import { handleAlive, worldDirectory } from './world';
import { until } from '../helpers/wait';
import { driverOf } from '../../lib/store/sqlite/driver';

const CLI = path.resolve(__dirname, '..', '..', 'lib', 'cli', 'main.js');

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

test("pidfence run exits with the job's status and keeps command, arguments and environment out of its output and the store", (t) => {
  const at = worldDirectory(t);
  const result = cli(
    ['run', '--db', at.file, '--project', 'p1', '--', 'sh', '-c', 'echo job-output; exit 7', 'secret-arg-7f3'],
    { JOB_SECRET: 'hunter2-env' },
  );
  t.is(result.status, 7);
  t.is(result.stdout, 'job-output\n', "the job's own output only");
  t.regex(
    result.stderr,
    /^pidfence: run run-[0-9a-f-]+ started \(stop it with: pidfence cancel run-[0-9a-f-]+ --db \S+\)\npidfence: run run-[0-9a-f-]+ failed\n$/,
  );
  t.false(/secret-arg|hunter2|job-output|sh -c/.test(result.stderr));
  const store = openSqliteStore(at.file);
  t.teardown(() => store.close());
  const dump = JSON.stringify(
    ['runs', 'attempts', 'run_events', 'attempt_events', 'receipt_journal'].map((table) =>
      driverOf(store.database).prepare(`SELECT * FROM ${table}`).all(),
    ),
  );
  t.false(/secret-arg|hunter2|job-output|sh -c/.test(dump));
  t.regex(dump, /"status":"failed"/);
  t.is(cli(['run', '--db', at.file, '--timeout', 'soon', '--', 'true']).status, 2, 'a bad duration is a usage error');
});

test('pidfence run: a missing command exits 127 and a non-executable one 126, each saying so; a run that timed out never exits 0, and the stop hint names --db', (t) => {
  const at = worldDirectory(t);
  const missing = cli(['run', '--db', at.file, '--', 'no-such-command-7f3']);
  t.is(missing.status, 127);
  t.regex(
    missing.stderr,
    /\npidfence: run run-[0-9a-f-]+ failed: command not found: check its name and \$PATH \(pidfence runs it without a shell\)\.\n$/,
  );
  const notExecutable = path.join(at.dir, 'not-executable.sh');
  writeFileSync(notExecutable, '#!/bin/sh\nexit 0\n', { mode: 0o644 });
  const denied = cli(['run', '--db', at.file, '--', notExecutable]);
  t.is(denied.status, 126);
  t.regex(
    denied.stderr,
    /\npidfence: run run-[0-9a-f-]+ failed: permission denied: the command is not an executable file for this user; check its mode and interpreter line\.\n$/,
  );
  // A job that itself exits 127 started fine: no sentence about its command.
  const own = cli(['run', '--db', at.file, '--', 'sh', '-c', 'exit 127']);
  t.is(own.status, 127);
  t.regex(own.stderr, /\npidfence: run run-[0-9a-f-]+ failed\n$/);
  for (const output of [missing, denied])
    t.false(/no-such-command|not-executable/.test(output.stderr), 'the command itself is never printed');
  // TERM ends the shell's wait; the job then exits 0 on its own, after its deadline.
  const timedOut = cli([
    'run',
    '--db',
    at.file,
    '--timeout',
    '300ms',
    '--grace',
    '5s',
    '--',
    'sh',
    '-c',
    'trap "exit 0" TERM; sleep 30 & wait',
  ]);
  t.is(timedOut.status, 124, timedOut.stderr);
  t.regex(timedOut.stderr, /timed_out\n$/);
  t.regex(
    timedOut.stderr,
    new RegExp(
      `stop it with: pidfence cancel run-[0-9a-f-]+ --db ${at.file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`,
    ),
  );
  t.regex(
    cli(['run', '--db', at.file, '--grace', '2m', '--', 'true']).stderr,
    /--grace must be from 0\.001s to 30s; you gave 2m \(120s\)/,
  );
});

test("pidfence cancel from another process stops a foreground pidfence run, which exits with the job's status", async (t) => {
  const at = worldDirectory(t);
  // exec keeps the process (and its proved identity); stderr joins stdout so the lines can be read.
  const runner = spawnJob(t, 'sh', [
    '-c',
    'exec "$0" "$@" 2>&1',
    process.execPath,
    CLI,
    'run',
    '--db',
    at.file,
    '--grace',
    '300ms',
    '--',
    'sleep',
    '30',
  ]);
  const started = await runner.waitForLine(/run (run-[0-9a-f-]+) started/);
  const runId = /run (run-[0-9a-f-]+) started/.exec(started)?.[1] ?? '';
  // The store file's owner holds every grant on it (docs/decisions/0170): no grant is needed here.
  const cancelled = cli(['cancel', '--db', at.file, runId]);
  t.is(cancelled.status, 0);
  t.is(cancelled.stdout, `cancel requested for ${runId}; its runner stops the job\n`);
  const exit = await runner.exited;
  t.is(exit.code, 143, 'the job ended by TERM');
  // The exit event can come before the last of the pipe is read (seen under load): wait for the line.
  t.is(await runner.waitForLine(/^pidfence: run run-[0-9a-f-]+ cancelled$/), `pidfence: run ${runId} cancelled`);
  const again = cli(['cancel', '--db', at.file, '--json', runId]);
  t.is(again.status, 4);
  t.like(JSON.parse(again.stderr), { error: { code: 'ERR_PIDFENCE_RUN_FINISHED', category: 'refused' } });
  t.is(cli(['cancel', '--db', at.file, 'run-missing']).status, 4);
});

test('pidfence supervise refuses to start when a readiness check fails, and says why', (t) => {
  const at = worldDirectory(t);
  openSqliteStore(at.file).close();
  const noAddon = cli(['supervise', '--db', at.file], { PIDFENCE_NO_ADDON: '1' });
  t.is(noAddon.status, 4);
  t.regex(noAddon.stderr, /supervise refused to start: .*native capabilities/);
  const store = openSqliteStore(at.file);
  driverOf(store.database)
    .prepare("UPDATE pidfence_migrations SET checksum = 'f00d' || substr(checksum, 5) WHERE version = 1")
    .run();
  store.close();
  const drifted = cli(['supervise', '--db', at.file]);
  t.is(drifted.status, 3);
  t.regex(drifted.stderr, /0001_runs_attempts_events was changed after it was applied/);
  t.is(drifted.stdout, '', 'nothing started');
});

test("pidfence supervise converges another runner's deadline and drains on SIGTERM, stopping the exact processes before it exits", async (t) => {
  const at = worldDirectory(t);
  // Jobs admitted by this test process as a runner that then goes away without draining.
  const store = openSqliteStore(at.file);
  const app = createExecution({
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
    receiptDirectory: `${at.file}.receipts`,
  });
  const timed = await app.admit({ projectId: 'p1', command: 'sleep', args: ['3600'], timeoutMs: 200 });
  const plain = await app.admit({ projectId: 'p1', command: 'sleep', args: ['3600'] });
  if (timed.kind !== 'admitted' || plain.kind !== 'admitted') throw new Error('not admitted');
  const plainHandle = (await store.runStore.getAttempt(plain.runId, plain.attemptId))?.handle ?? '';
  // The runner ends without stopping its jobs: ended is a proof, so supervise takes them over.
  await store.runnerStore.endRunner(app.runner.runnerId);

  const supervisor = spawnJob(t, process.execPath, [CLI, 'supervise', '--db', at.file, '--grace', '300ms']);
  await supervisor.waitForLine(/^pidfence supervise: ready$/);
  await until(async () => (await store.runStore.getRun(timed.runId))?.status === 'timed_out', {
    timeoutMs: 15_000,
    what: 'the deadline to converge',
  });
  t.true(handleAlive(plainHandle));
  t.is(signalVerified(supervisor.identity, 'SIGTERM', { group: false }).kind, 'signalled');
  const exit = await supervisor.exited;
  t.is(exit.code, 0);
  t.true(supervisor.lines.includes('pidfence supervise: drained (1 converged, 0 remaining)'));
  t.false(handleAlive(plainHandle));
  t.like(await store.runStore.getRun(plain.runId), { status: 'cancelled', cancelReason: 'shutdown' });
  t.like(await store.runStore.getRun(timed.runId), { cancelReason: 'timeout' });
  store.close();
});

test("pidfence run --json: stdout is one JSON document and the job writes to stderr; options after -- are the job's; errors are JSON on stderr", (t) => {
  const at = worldDirectory(t);
  const echo = ['sh', '-c', 'echo "job:$*"', 'sh', '--json', '--db', '/nowhere/else.db'];
  const json = cli(['run', '--db', at.file, '--json', '--', ...echo]);
  t.is(json.status, 0, json.stderr);
  const report = JSON.parse(json.stdout) as Record<string, unknown>;
  t.deepEqual(Object.keys(report).sort(), [
    'exit',
    'exitStatus',
    'name',
    'projectId',
    'runId',
    'startFailure',
    'status',
  ]);
  t.like(report, {
    name: null,
    projectId: 'default',
    status: 'succeeded',
    exitStatus: 0,
    exit: { cause: 'receipt', exitCode: 0, signal: null },
    startFailure: null,
  });
  t.regex(String(report.runId), /^run-[0-9a-f-]+$/);
  t.regex(json.stderr, /\njob:--json --db \/nowhere\/else\.db\n/, "the job's own output, and its own options");
  // Without pidfence's --json the job's --json changes nothing: stdout is the job's.
  const text = cli(['run', '--db', at.file, '--', ...echo]);
  t.is(text.status, 0);
  t.is(text.stdout, 'job:--json --db /nowhere/else.db\n');
  const store = openSqliteStore(at.file);
  t.is(
    (driverOf(store.database).prepare('SELECT COUNT(*) AS n FROM runs').get() as { n: number }).n,
    2,
    "both runs went to --db, not to the job's --db",
  );
  store.close();

  const missing = cli(['run', '--db', at.file, '--json', '--', 'no-such-command-7f3']);
  t.is(missing.status, 127);
  t.like(JSON.parse(missing.stdout), {
    status: 'failed',
    exitStatus: 127,
    exit: { exitCode: 127 },
    startFailure: 'command_not_found',
  });
  const nowhere = cli(['run', '--db', path.join(at.dir, 'missing', 'dir', 'p.db'), '--json', '--', 'true']);
  t.is(nowhere.status, 3);
  t.is(nowhere.stdout, '');
  t.like(JSON.parse(nowhere.stderr), { error: { code: 'ERR_PIDFENCE_STORE_UNAVAILABLE', category: 'unavailable' } });
});

test('pidfence supervise --json: every stdout line is one JSON event (recovered, ready, each stop by run id and result, drained), never a PID', async (t) => {
  const at = worldDirectory(t);
  const store = openSqliteStore(at.file);
  t.teardown(() => store.close());
  const app = createExecution({
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: async () => undefined,
    },
    receiptDirectory: `${at.file}.receipts`,
  });
  const job = await app.admit({ projectId: 'p1', command: 'sleep', args: ['30'] });
  if (job.kind !== 'admitted') throw new Error('not admitted');
  const pid = (await store.runStore.getAttempt(job.runId, job.attemptId))?.pid ?? 0;
  await store.runnerStore.endRunner(app.runner.runnerId);

  const supervisor = spawnJob(t, process.execPath, [CLI, 'supervise', '--db', at.file, '--grace', '300ms', '--json']);
  await supervisor.waitForLine(/"event":"ready"/, 15_000);
  await store.runStore.requestCancellation({ runId: job.runId, reason: 'user', eventId: 'evt-json-cancel' });
  await supervisor.waitForLine(/"event":"stopped"/, 15_000);
  t.is(signalVerified(supervisor.identity, 'SIGTERM', { group: false }).kind, 'signalled');
  t.is((await supervisor.exited).code, 0);
  const events = supervisor.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  t.deepEqual(
    events.map((event) => event.event),
    ['recovered', 'ready', 'stopped', 'drained'],
  );
  t.deepEqual(events[2], { event: 'stopped', runId: job.runId, result: 'termination_requested' });
  t.like(events[0], { running: 1 });
  t.like(events[3], { outcome: 'drained' });
  t.false(new RegExp(`(^|[^0-9])${pid}([^0-9]|$)`).test(supervisor.lines.join('\n')), 'no PID');
});

/** One word for `sh -c`. */
const shellWord = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`;

test('a stop that waits out its grace says so on a terminal (a pseudo-terminal from script(1)); without a terminal it stays silent', (t) => {
  const at = worldDirectory(t);
  // The whole group ignores TERM (the ignore is inherited), so the stop waits its full grace, then KILLs.
  const args = [
    'run',
    '--db',
    at.file,
    '--timeout',
    '200ms',
    '--grace',
    '1s',
    '--',
    'sh',
    '-c',
    'trap "" TERM; sleep 30',
  ];
  const onTerminal = spawnSync(
    'script',
    ['-qec', [process.execPath, CLI, ...args].map(shellWord).join(' '), '/dev/null'],
    { encoding: 'utf8', timeout: 60_000 },
  );
  // Timed out: 124 as timeout(1), though KILL ended the job (docs/decisions/0225).
  t.is(onTerminal.status, 124, onTerminal.stdout);
  t.regex(
    onTerminal.stdout,
    /pidfence: stopping run run-[0-9a-f-]+: TERM to its process group now, KILL in 1s if it is still running\r?\n/,
  );
  const inLog = cli(args);
  t.is(inLog.status, 124);
  t.regex(inLog.stderr, /timed_out\n$/);
  t.false(inLog.stderr.includes('stopping run'), inLog.stderr);
});
