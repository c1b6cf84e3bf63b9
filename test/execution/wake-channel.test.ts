// The wake-up channel (issue 25, docs/decisions/0175, 0176, 0211): a committed cancel wakes the runner
// that owns the run, and only it; a deadline fires on the timer armed for it; a forged, missing or
// flooding wake-up changes no row and delays no real stop; a crashed runner's socket is replaced
// safely and a live one never removed; a directory or socket of another user is refused. Real CLI
// processes, real unix sockets, a real SQLite file, real jobs.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';
import test, { type ExecutionContext } from 'ava';

import { PROFILES } from '../../lib/dispatch/index';
import type { ControlCycleReport } from '../../lib/execution/index';
import { listenForWakeUps, removeStaleWakeSocket, sendWakeUp, wakeSocketPath } from '../../lib/execution/wake-channel';
import { signalVerified } from '../../lib/native/index';
import { groupMembers } from '../helpers/job-groups';
import { fixturesDir, spawnJob, type Job } from '../helpers/processes';
import { delay, until } from '../helpers/wait';
import { cancel, cliProcess, orphanedRun, runStatus, sqliteJobGroup, startRun, type CliRun } from './cli-runs';
import { handleAlive, openWorld, worldDirectory, type World } from './world';

/** A user who is not us (tests run as root): `nobody`. */
const OTHER_UID = 65534;
const OWNER_STOPS = (runId: string): string => `cancel requested for ${runId}; its runner stops the job`;

/** Every row of every table, in a stable order: what "changes no row" compares. */
function storeRows(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{
      name: string;
    }>;
    return JSON.stringify(tables.map(({ name }) => [name, db.prepare(`SELECT * FROM "${name}" ORDER BY 1, 2`).all()]));
  } finally {
    db.close();
  }
}

/** Runners of `kind` ever registered on the store: a `cancel` registers one only when it takes a run over. */
function runnersOfKind(file: string, kind: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM runners WHERE kind = ?').get(kind) as { n: number }).n;
  } finally {
    db.close();
  }
}

function wakeDirectoryOf(file: string): string {
  return `${file}.wake`;
}

/** The one socket in the store's wake-up directory (a single runner listens). */
function onlySocket(file: string): string {
  const entries = readdirSync(wakeDirectoryOf(file));
  if (entries.length !== 1) throw new Error(`expected one wake-up socket, found ${entries.length}`);
  return path.join(wakeDirectoryOf(file), entries[0] as string);
}

/** How one connect to `socketPath` ends: `connected`, or the errno code. */
function connectOnce(socketPath: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ path: socketPath });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

/** test/fixtures/wake-flood.c, compiled for this test run. */
function floodBinary(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-flood-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const binary = path.join(dir, 'wake-flood');
  execFileSync('cc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', binary, path.join(fixturesDir, 'wake-flood.c')]);
  return binary;
}

function floodCounts(flood: Job): Record<string, number> {
  const line = flood.lines.find((entry) => entry.startsWith('connected ')) ?? '';
  const counts: Record<string, number> = {};
  for (const [, name, value] of line.matchAll(/(\w+) (\d+)/g)) counts[name as string] = Number(value);
  return counts;
}

/** An in-process runner on the 5 s edge cadence with its wake-up channel, its cycles recorded (end time, report). */
function edgeRunner(
  t: ExecutionContext,
  at: { dir: string; file: string; receipts: string },
): World & { readonly cycleEnds: number[]; readonly reports: ControlCycleReport[] } {
  const cycleEnds: number[] = [];
  const reports: ControlCycleReport[] = [];
  const world = openWorld(t, {
    at,
    profile: 'edge',
    wakeDirectory: wakeDirectoryOf(at.file),
    onCycle: (report) => {
      cycleEnds.push(performance.now());
      reports.push(report);
    },
  });
  return Object.assign(world, { cycleEnds, reports });
}

/**
 * How long after the cycle before it the first cycle that did `what` ended. A cycle the cadence
 * started ends at least a full cadence after the one before it; one that ends sooner was started
 * early: by a wake-up, or by the timer armed for a due deadline. No other timing is assumed.
 */
async function sincePreviousCycle(
  runner: ReturnType<typeof edgeRunner>,
  what: (report: ControlCycleReport) => boolean,
): Promise<number> {
  await until(() => runner.reports.some(what), { timeoutMs: 10_000, what: 'the cycle to end' });
  const at = runner.reports.findIndex(what);
  if (at < 1) throw new Error('no such cycle after a first one');
  return (runner.cycleEnds[at] as number) - (runner.cycleEnds[at - 1] as number);
}

async function admittedSleep(world: World): Promise<{ runId: string; attemptId: string; handle: string }> {
  const admitted = await world.app.admit({ projectId: 'default', command: 'sleep', args: ['30'] });
  if (admitted.kind !== 'admitted') throw new Error('not admitted');
  const handle = (await world.store.runStore.getAttempt(admitted.runId, admitted.attemptId))?.handle ?? '';
  return { runId: admitted.runId, attemptId: admitted.attemptId, handle };
}

/** An edge runner with one `sleep 30` job of its own, started and past its first cycle. */
async function edgeRunnerWithJob(t: ExecutionContext): Promise<{
  at: { file: string };
  runner: ReturnType<typeof edgeRunner>;
  job: Awaited<ReturnType<typeof admittedSleep>>;
}> {
  const at = worldDirectory(t);
  const runner = edgeRunner(t, at);
  const job = await admittedSleep(runner);
  runner.app.start();
  await until(() => runner.cycleEnds.length >= 1, { timeoutMs: 10_000, what: 'the first cycle' });
  return { at, runner, job };
}

test.serial(
  "a committed cancel wakes its runner at once: on the 5 s edge cadence the job is stopped long before the next cadence, by the cancel's one wake-up",
  async (t) => {
    const { at, runner, job } = await edgeRunnerWithJob(t);
    const wakeUps = runner.app.lifecycle.wakeUps;
    const cancelled = await cancel(t, at.file, job.runId);
    t.is(cancelled.code, 0);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(job.runId)]);
    t.like(await runner.completed(job.runId), { kind: 'completed', status: 'cancelled' });
    // Nothing else was due: without the wake-up the stop would wait for a cycle a full cadence after the last.
    const early = await sincePreviousCycle(runner, (report) => report.dispatched > 0);
    t.true(
      early < PROFILES.edge.periodMs,
      `the stopping cycle ended ${early.toFixed(0)} ms after the one before it (cadence ${PROFILES.edge.periodMs} ms)`,
    );
    t.is(runner.app.lifecycle.wakeUps, wakeUps + 1, "exactly one wake-up: the cancel's");
    t.false(handleAlive(job.handle));
    t.is(runnersOfKind(at.file, 'cancel'), 0, 'cancel took nothing over');
  },
);

test.serial(
  'two runners on one store: a cancel wakes the owner only; the other is not woken and its job runs on',
  async (t) => {
    const at = worldDirectory(t);
    const owner = edgeRunner(t, at);
    const other = edgeRunner(t, at);
    const mine = await admittedSleep(owner);
    const theirs = await admittedSleep(other);
    owner.app.start();
    other.app.start();
    await until(() => owner.cycleEnds.length >= 1 && other.cycleEnds.length >= 1, {
      timeoutMs: 10_000,
      what: "both runners' first cycles",
    });
    t.is(readdirSync(wakeDirectoryOf(at.file)).length, 2, 'one socket per runner');
    const [ownerWakeUps, otherWakeUps] = [owner.app.lifecycle.wakeUps, other.app.lifecycle.wakeUps];
    const cancelled = await cancel(t, at.file, mine.runId);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(mine.runId)]);
    t.like(await owner.completed(mine.runId), { status: 'cancelled' });
    t.is(owner.app.lifecycle.wakeUps, ownerWakeUps + 1);
    t.is(other.app.lifecycle.wakeUps, otherWakeUps, 'the other runner was not woken');
    t.true(
      other.reports.every((report) => report.dispatched === 0),
      'the other runner stopped nothing',
    );
    t.is(await runStatus(at.file, theirs.runId), 'running');
    t.true(handleAlive(theirs.handle), "the other runner's job runs on");
    t.deepEqual(other.completions, []);
  },
);

test.serial(
  'a cancel of a run that does not exist wakes nobody and changes no row; a forged wake-up makes a cycle that stops nothing',
  async (t) => {
    const { at, runner, job } = await edgeRunnerWithJob(t);
    const rows = storeRows(at.file);
    const wakeUps = runner.app.lifecycle.wakeUps;
    const missing = await cancel(t, at.file, 'run-that-does-not-exist');
    t.is(missing.code, 4, 'refused');
    t.true(
      missing.lines.some((line) => line.includes('ERR_PIDFENCE_RUN_NOT_FOUND')),
      missing.lines.join('\n'),
    );
    t.is(runner.app.lifecycle.wakeUps, wakeUps, 'nobody was woken');
    // A connection made by hand: "look", with nothing committed to look at.
    const cycles = runner.cycleEnds.length;
    t.is(await connectOnce(runner.app.wakeSocket() as string), 'connected');
    await until(() => runner.cycleEnds.length > cycles, { timeoutMs: 4_000, what: 'the woken cycle' });
    t.is(runner.app.lifecycle.wakeUps, wakeUps + 1);
    t.is(storeRows(at.file), rows, 'no row changed');
    t.true(handleAlive(job.handle));
    t.is(await runStatus(at.file, job.runId), 'running');
  },
);

/** A foreground `pidfence run` of `sleep 30`, its one wake-up socket, and the flood program. */
async function runToFlood(
  t: ExecutionContext,
): Promise<{ flood: string; at: { file: string }; run: CliRun; socket: string }> {
  const flood = floodBinary(t);
  const at = worldDirectory(t);
  const run = await startRun(t, at.file, sqliteJobGroup(at.file), ['sleep', '30']);
  const socket = onlySocket(at.file);
  await delay(300);
  return { flood, at, run, socket };
}

test.serial(
  'a flood of 10,000 wake-ups a second changes no row, and a real cancel during it still reaches the runner and stops the job while the flood goes on',
  async (t) => {
    const { flood, at, run, socket } = await runToFlood(t);
    const rows = storeRows(at.file);
    const flooding = spawnJob(t, flood, [socket, '10000', '6']);
    await delay(1_000);
    t.is(storeRows(at.file), rows, 'a second of the flood changed no row');
    const cancelled = await cancel(t, at.file, run.runId);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(run.runId)]);
    const first = await Promise.race([
      run.job.exited.then((exit) => exit.code),
      flooding.exited.then(() => 'the flood ended first'),
    ]);
    t.is(first, 143, 'the job was stopped (TERM) while the flood went on');
    await flooding.exited;
    t.true((floodCounts(flooding).connected ?? 0) > 1_000, flooding.lines.join('\n'));
    t.is(runnersOfKind(at.file, 'cancel'), 0, 'cancel reached the runner through its socket: no takeover attempt');
    t.is(await runStatus(at.file, run.runId), 'cancelled');
  },
);

test.serial(
  'a runner whose wake-up queue is full (EAGAIN) counts as woken: cancel does not try to take its run over, and the runner stops the job once it takes its queue',
  async (t) => {
    const { flood, at, run, socket } = await runToFlood(t);
    // Stopped, the runner takes no connection: its queue fills and every further connect gets EAGAIN.
    t.is(signalVerified(run.job.identity, 'SIGSTOP', { group: false }).kind, 'signalled');
    t.teardown(() => {
      signalVerified(run.job.identity, 'SIGCONT', { group: false });
    });
    const filler = spawnJob(t, flood, [socket, '2000', '0.1']);
    await filler.exited;
    t.true((floodCounts(filler).busy ?? 0) > 0, filler.lines.join('\n'));
    const cancelled = await cancel(t, at.file, run.runId);
    t.is(cancelled.code, 0);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(run.runId)]);
    t.is(
      runnersOfKind(at.file, 'cancel'),
      0,
      'a full queue is a live runner: no takeover attempt, no runner registered by cancel',
    );
    t.is(signalVerified(run.job.identity, 'SIGCONT', { group: false }).kind, 'signalled');
    t.is((await run.job.exited).code, 143);
    t.is(await runStatus(at.file, run.runId), 'cancelled');
  },
);

test.serial(
  "a crashed runner's stale socket: the supervise that adopts its job removes it, listens on its own, and a cancel wakes it",
  async (t) => {
    const at = worldDirectory(t);
    const orphan = await orphanedRun(t, at.file);
    const stale = onlySocket(at.file);
    t.is(await connectOnce(stale), 'ECONNREFUSED', "nobody listens on the crashed runner's socket");
    const supervisor = cliProcess(t, ['supervise', '--db', at.file, '--profile', 'edge', '--grace', '300ms']);
    await supervisor.waitForLine(/^pidfence supervise: ready$/, 15_000);
    t.false(existsSync(stale), 'the stale socket was removed once its runner was proved gone');
    const own = onlySocket(at.file);
    t.is(await connectOnce(own), 'connected', 'the supervise listens on its own socket');
    const cancelled = await cancel(t, at.file, orphan.runId);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(orphan.runId)]);
    await supervisor.waitForLine(new RegExp(`^pidfence supervise: stopped ${orphan.runId} `), 15_000);
    await until(() => groupMembers(orphan.pgid).length === 0, { timeoutMs: 10_000, what: 'the job group to end' });
    t.is(runnersOfKind(at.file, 'cancel'), 0);
    await until(async () => (await runStatus(at.file, orphan.runId)) === 'cancelled', {
      timeoutMs: 15_000,
      what: 'the run to converge',
    });
    t.is(signalVerified(supervisor.identity, 'SIGTERM', { group: false }).kind, 'signalled');
    t.is((await supervisor.exited).code, 0);
    t.false(existsSync(own), 'a drained supervise removes its socket');
  },
);

/** A wake-up directory of our own (0700) and a runner id, for the socket-level tests. */
function wakePlace(t: ExecutionContext): { directory: string; runnerId: string; socketPath: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-wake-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const directory = path.join(dir, 'store.db.wake');
  mkdirSync(directory, { mode: 0o700 });
  const runnerId = 'rnr-wake-test';
  return { directory, runnerId, socketPath: wakeSocketPath(directory, runnerId) };
}

/** A listener on `socketPath` in its own process: `crashed` SIGKILLs it (its socket file stays), `busy` stops it and fills its queue. */
async function foreignListener(t: ExecutionContext, socketPath: string): Promise<Job> {
  const listener = spawnJob(t, process.execPath, [
    '-e',
    `require('net').createServer().listen({ path: ${JSON.stringify(socketPath)}, backlog: 4 }, () => console.log('listening'))`,
  ]);
  await listener.waitForLine(/^listening$/, 10_000);
  return listener;
}

test.serial(
  'a stale socket left by a crashed runner is replaced; a live listener, idle or with a full queue, is never removed and the new one is refused',
  async (t) => {
    const place = wakePlace(t);
    const crashed = await foreignListener(t, place.socketPath);
    await crashed.stop();
    t.true(existsSync(place.socketPath));
    t.is(await sendWakeUp(place.directory, place.runnerId), 'no_listener');
    let woken = 0;
    const listener = await listenForWakeUps(place.directory, place.runnerId, () => {
      woken += 1;
    });
    t.is(await sendWakeUp(place.directory, place.runnerId), 'sent');
    await until(() => woken === 1, { what: 'the wake-up' });
    t.false(await removeStaleWakeSocket(place.directory, place.runnerId), 'a live listener is not removed');
    await t.throwsAsync(
      listenForWakeUps(place.directory, place.runnerId, () => undefined),
      { code: 'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED' } as never,
    );
    // The refused listener's probe was one more connection ("look") to the live one: harmless.
    const before = woken;
    t.is(await sendWakeUp(place.directory, place.runnerId), 'sent', 'the first listener still listens');
    await until(() => woken > before, { what: 'the next wake-up' });
    await listener.close();

    const busy = await foreignListener(t, place.socketPath);
    t.is(signalVerified(busy.identity, 'SIGSTOP', { group: false }).kind, 'signalled');
    const results: string[] = [];
    for (let i = 0; i < 16; i += 1) results.push(await connectOnce(place.socketPath));
    t.true(results.includes('EAGAIN'), results.join(' '));
    t.is(await sendWakeUp(place.directory, place.runnerId), 'busy', 'a full queue is a live listener');
    t.false(await removeStaleWakeSocket(place.directory, place.runnerId));
    const refusal = await t.throwsAsync(listenForWakeUps(place.directory, place.runnerId, () => undefined));
    t.is(
      (refusal as { code?: string }).code,
      'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED',
      'a typed refusal, never a raw EADDRINUSE',
    );
    t.true(existsSync(place.socketPath));
    signalVerified(busy.identity, 'SIGCONT', { group: false });
  },
);

test.serial(
  'a wake-up socket or directory of another user is refused with a typed error and never connected to',
  async (t) => {
    const place = wakePlace(t);
    let connections = 0;
    const foreign = net.createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => foreign.listen(place.socketPath, resolve));
    t.teardown(() => new Promise<void>((resolve) => foreign.close(() => resolve())));
    chownSync(place.socketPath, OTHER_UID, OTHER_UID);
    t.is(await sendWakeUp(place.directory, place.runnerId), 'refused');
    await t.throwsAsync(
      listenForWakeUps(place.directory, place.runnerId, () => undefined),
      { code: 'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED' } as never,
    );
    t.false(await removeStaleWakeSocket(place.directory, place.runnerId));
    t.true(existsSync(place.socketPath));
    chownSync(place.directory, OTHER_UID, OTHER_UID);
    t.is(await sendWakeUp(place.directory, place.runnerId), 'refused');
    chownSync(place.directory, 0, 0);
    chmodSync(place.directory, 0o777);
    t.is(await sendWakeUp(place.directory, place.runnerId), 'refused', 'a directory open to others');
    await t.throwsAsync(
      listenForWakeUps(place.directory, 'rnr-other', () => undefined),
      { code: 'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED' } as never,
    );
    t.is(connections, 0, 'nothing ever connected to the foreign socket');
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'pidfence-wake-link-'));
    t.teardown(() => rmSync(elsewhere, { recursive: true, force: true }));
    chmodSync(elsewhere, 0o700);
    const linked = path.join(path.dirname(place.directory), 'linked.wake');
    symlinkSync(elsewhere, linked);
    await t.throwsAsync(
      listenForWakeUps(linked, place.runnerId, () => undefined),
      { code: 'ERR_PIDFENCE_WAKE_CHANNEL_REFUSED' } as never,
    );
    t.deepEqual(readdirSync(elsewhere), [], 'nothing made behind a symlink');
  },
);

test.serial(
  'a runner whose wake-up directory belongs to another user says so once, keeps its cadence, and still stops its job on a cancel',
  async (t) => {
    const at = worldDirectory(t);
    mkdirSync(wakeDirectoryOf(at.file), { mode: 0o700 });
    chownSync(wakeDirectoryOf(at.file), OTHER_UID, OTHER_UID);
    const run = await startRun(t, at.file, sqliteJobGroup(at.file), ['sleep', '30']);
    await until(() => run.job.lines.some((line) => line.includes('ERR_PIDFENCE_WAKE_CHANNEL_REFUSED')), {
      timeoutMs: 5_000,
      what: 'the refusal line',
    });
    t.is(
      run.job.lines.filter((line) => line.includes('ERR_PIDFENCE_WAKE_CHANNEL_REFUSED')).length,
      1,
      run.job.lines.join('\n'),
    );
    t.false(
      run.job.lines.some((line) => / at .*\.js:\d+/.test(line)),
      'no stack trace',
    );
    t.deepEqual(readdirSync(wakeDirectoryOf(at.file)), [], "nothing made in the other user's directory");
    const cancelled = await cancel(t, at.file, run.runId);
    t.deepEqual(cancelled.lines, [OWNER_STOPS(run.runId)]);
    t.is((await run.job.exited).code, 143, 'its cadence stopped the job');
    t.is(await runStatus(at.file, run.runId), 'cancelled');
  },
);

test.serial(
  'a deadline fires on the one timer armed for it: a 300 ms timeout on the 5 s edge cadence ends long before the cadence',
  async (t) => {
    const at = worldDirectory(t);
    const runner = edgeRunner(t, at);
    runner.app.start();
    await until(() => runner.cycleEnds.length >= 1, { timeoutMs: 10_000, what: 'the first cycle' });
    const admittedAt = performance.now();
    const admitted = await runner.app.admit({ projectId: 'default', command: 'sleep', args: ['30'], timeoutMs: 300 });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    t.like(await runner.completed(admitted.runId), { status: 'timed_out' });
    t.true(performance.now() - admittedAt >= 300, 'not before its deadline');
    // The admission's wake-up cycle read the deadline and armed the one timer for it.
    const early = await sincePreviousCycle(runner, (report) => report.deadlines > 0);
    t.true(
      early < PROFILES.edge.periodMs,
      `the timeout cycle ended ${early.toFixed(0)} ms after the one before it (cadence ${PROFILES.edge.periodMs} ms)`,
    );
  },
);
