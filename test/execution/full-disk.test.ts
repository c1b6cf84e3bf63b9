// Issue 28 item 3 (docs/decisions/0191): a full disk never loses control of a job. The store and its
// receipts on a 4 MiB tmpfs filled to the last byte: a stop the user asks for (Ctrl-C, `cancel`, a
// deadline) still goes out within the grace, paid for by the disk reserve; with the reserve spent,
// nothing is signalled before its intent is recorded and the run converges by itself once there is
// room (a `supervise` asked to drain included); a receipt that waits for room, or for a receipt
// directory that can be written again (docs/decisions/0290), keeps a success a success; a full disk
// before `run` is one clear sentence and exit 3; no stack trace, no temp file, no empty store left.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { groupMembers, handleGroup } from '../helpers/job-groups';
import { smallDisk, type SmallDisk } from '../helpers/small-disk';
import { delay, until, untilValue } from '../helpers/wait';
import { cliProcess } from './cli-runs';
import { cliDone, runEndWithin, runStatusOf, startedRun, storeFile, storeRow, type StartedRun } from './clock-runs';

/** A job that ends with 7 on TERM, so a TERM (not a KILL) is what ended it. */
const TERM_OBEYING = ['sh', '-c', 'trap "exit 7" TERM; sleep 300 & wait'];
const STACK_LINE = /^\s+at\s/;

function store(disk: SmallDisk): string {
  return path.join(disk.dir, 'pidfence.db');
}

function jobGroup(file: string, run: StartedRun): number {
  const handle = storeRow<{ handle: string }>(file, 'SELECT handle FROM attempts WHERE run_id = ?', run.runId)?.handle;
  if (handle === undefined) throw new Error('no handle');
  return handleGroup(handle);
}

/**
 * What every full-disk run must also hold: no stack trace, no temp file, no receipt left over. A
 * receipt is removed just after the synced commit of its end (docs/decisions/0010), so a check right
 * after the end is seen waits a moment for that removal instead of racing it.
 */
async function leftNothingBehind(t: ExecutionContext, disk: SmallDisk, lines: readonly string[]): Promise<void> {
  t.deepEqual(
    lines.filter((line) => STACK_LINE.test(line) || /unexpected failure/.test(line)),
    [],
    'no stack trace',
  );
  const leftover = (): string[] => disk.files().filter((name) => /\.tmp$|\.receipt$/.test(name));
  await until(() => leftover().length === 0, {
    timeoutMs: 5_000,
    intervalMs: 50,
    what: 'the receipt removed after its end',
  }).catch(() => undefined);
  t.deepEqual(leftover(), [], 'no temp file or receipt left');
}

function interrupt(run: StartedRun, signal: NodeJS.Signals = 'SIGINT'): void {
  const sent = signalVerified(run.job.identity, signal, { group: false }).kind;
  if (sent !== 'signalled') throw new Error(`the runner could not be signalled: ${sent}`);
}

/** A running job whose store's disk is full with the reserve already spent, and the runner just interrupted. */
async function interruptedWithoutReserve(
  t: ExecutionContext,
): Promise<{ disk: SmallDisk; file: string; run: StartedRun; pgid: number }> {
  const disk = smallDisk(t);
  const file = store(disk);
  const run = await startedRun(t, file, ['--grace', '1s', '--', ...TERM_OBEYING]);
  const pgid = jobGroup(file, run);
  rmSync(`${file}.reserve`);
  disk.fill();
  interrupt(run);
  await run.job.waitForLine(/ERR_PIDFENCE_STORE_FULL/, 10_000);
  return { disk, file, run, pgid };
}

test.serial(
  'full disk, Ctrl-C: TERM goes out within the grace (the reserve pays for the intent) and the run ends cancelled',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const run = await startedRun(t, file, ['--grace', '1s', '--', ...TERM_OBEYING]);
    t.true(existsSync(`${file}.reserve`), 'the runner keeps a disk reserve');
    disk.fill();
    interrupt(run);
    const sentAt = performance.now();
    const end = await runEndWithin(run, 15_000);
    t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
    t.is(end?.code, 7, 'the job ended by its TERM trap');
    t.true(performance.now() - sentAt < 3_000, 'within the 1 s grace and a cadence');
    t.is(runStatusOf(file, run.runId), 'cancelled');
    await leftNothingBehind(t, disk, run.job.lines);
  },
);

test.serial(
  'full disk with the reserve spent, Ctrl-C: nothing is signalled before the intent is recorded; once there is room the run stops the job by itself',
  async (t) => {
    const { disk, file, run, pgid } = await interruptedWithoutReserve(t);
    const notice = run.job.lines.join('\n');
    t.true(notice.includes(`the disk holding ${file} is full (filesystem ${disk.dir}`), notice);
    t.regex(notice, /nothing is signalled before it is recorded/);
    await delay(2_000);
    t.true(groupMembers(pgid).length >= 2, 'the job still runs: no intent, no signal');
    t.is(runStatusOf(file, run.runId), 'running');
    disk.free();
    const freedAt = performance.now();
    const end = await runEndWithin(run, 20_000);
    t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
    t.is(end?.code, 7, 'stopped by TERM once the intent was recorded');
    t.true(performance.now() - freedAt < 10_000, 'within the backoff (≤ 5 s) and the grace of the room returning');
    await leftNothingBehind(t, disk, run.job.lines);
  },
);

test.serial(
  'full disk with the reserve spent, a second Ctrl-C: KILL goes out at once, no stack trace, and the run ends cancelled once there is room',
  async (t) => {
    const { disk, file, run, pgid } = await interruptedWithoutReserve(t);
    interrupt(run);
    await run.job.waitForLine(/sent KILL/, 5_000);
    await until(() => groupMembers(pgid).length === 0, { timeoutMs: 5_000, what: 'the job group gone' });
    await delay(1_000);
    t.is(run.job.child.exitCode, null, 'the run waits for room to record the end');
    disk.free();
    const end = await runEndWithin(run, 20_000);
    t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
    t.is(runStatusOf(file, run.runId), 'cancelled');
    await leftNothingBehind(t, disk, run.job.lines);
  },
);

test.serial(
  'full disk: `cancel` still records its intent (the reserve) and the runner stops the job within the grace',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const run = await startedRun(t, file, ['--grace', '1s', '--', ...TERM_OBEYING]);
    disk.fill();
    const cancelled = await cliDone(t, ['cancel', '--db', file, run.runId]);
    t.is(cancelled.code, 0, cancelled.lines.join('\n'));
    t.regex(cancelled.lines.join('\n'), /cancel requested/);
    const end = await runEndWithin(run, 10_000);
    t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
    t.is(end?.code, 7);
    await leftNothingBehind(t, disk, [...run.job.lines, ...cancelled.lines]);
  },
);

test.serial('full disk: a deadline still becomes timeout intent and stops the job on time', async (t) => {
  const disk = smallDisk(t);
  const file = store(disk);
  const run = await startedRun(t, file, ['--timeout', '3s', '--grace', '1s', '--', ...TERM_OBEYING]);
  disk.fill();
  const end = await runEndWithin(run, 15_000);
  t.is(end?.status, 'timed_out', run.job.lines.join('\n'));
  t.true(end !== null && end.afterMs < 7_000, `stopped at its deadline (${Math.round(end?.afterMs ?? -1)} ms)`);
  await leftNothingBehind(t, disk, run.job.lines);
});

test.serial(
  'full disk when the job exits: its receipt waits for room, the run stays running, then succeeds; no temp file',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const run = await startedRun(t, file, ['--', 'sh', '-c', 'sleep 1.5']);
    disk.fill();
    await delay(4_000);
    t.is(runStatusOf(file, run.runId), 'running', 'not failed, not lost: the launcher keeps the exit status');
    t.deepEqual(
      disk.files().filter((name) => name.endsWith('.tmp')),
      [],
      "no temp receipt between the launcher's tries",
    );
    disk.free();
    const end = await runEndWithin(run, 15_000);
    t.is(end?.status, 'succeeded', run.job.lines.join('\n'));
    t.is(end?.code, 0);
    await leftNothingBehind(t, disk, run.job.lines);
  },
);

test.serial(
  'receipt directory read-only when the job exits: the receipt waits until it can be written, the run stays running, then succeeds; no temp file',
  async (t) => {
    // Not only a full disk: a receipt directory remounted read-only (or made unwritable) at the job's
    // exit must not turn a success into `failed`/`lost` either; the launcher keeps the exit status.
    const disk = smallDisk(t);
    const file = storeFile(t, 'pidfence-receipt-ro-');
    symlinkSync(disk.dir, `${file}.receipts`);
    const run = await startedRun(t, file, ['--', 'sh', '-c', 'sleep 1.5']);
    execFileSync('mount', ['-o', 'remount,ro', disk.dir]);
    await delay(4_000);
    t.is(runStatusOf(file, run.runId), 'running', 'not failed, not lost: the launcher keeps the exit status');
    execFileSync('mount', ['-o', 'remount,rw', disk.dir]);
    const end = await runEndWithin(run, 15_000);
    t.is(end?.status, 'succeeded', run.job.lines.join('\n'));
    t.is(end?.code, 0);
    await leftNothingBehind(t, disk, run.job.lines);
  },
);

test.serial(
  'receipt directory removed while the job runs: the launcher does not wait for it for ever; the run ends (lost) and no launcher is left',
  async (t) => {
    const file = storeFile(t, 'pidfence-receipt-gone-');
    const run = await startedRun(t, file, ['--', 'sh', '-c', 'sleep 1.5']);
    const pgid = jobGroup(file, run);
    rmSync(`${file}.receipts`, { recursive: true, force: true });
    const end = await runEndWithin(run, 15_000);
    t.not(end, null, `the run ended: ${run.job.lines.join('\n')}`);
    t.is(end?.status, 'failed');
    t.true(
      run.job.lines.some((line) => line.includes('the receipt directory is gone')),
      run.job.lines.join('\n'),
    );
    t.is(groupMembers(pgid).length, 0, 'no launcher left retrying');
  },
);

test.serial(
  'full disk before `run`: ERR_PIDFENCE_STORE_FULL names the store and its filesystem, exit 3, nothing started, no empty store left',
  async (t) => {
    const disk = smallDisk(t);
    const fresh = path.join(disk.dir, 'fresh.db');
    disk.fill();
    const refused = await cliDone(t, ['run', '--db', fresh, '--', 'true']);
    t.is(refused.code, 3, refused.lines.join('\n'));
    t.regex(
      refused.lines.join('\n'),
      new RegExp(
        `the disk holding ${fresh.replace(/[.]/g, '\\.')} is full \\(filesystem ${disk.dir}, \\d+ bytes free\\).*ERR_PIDFENCE_STORE_FULL`,
      ),
    );
    t.false(existsSync(fresh), 'no 0-byte store that the next run would call "not a database"');
    disk.free();
    // An existing store on a disk that filled up: the same sentence, and no run was created.
    const file = store(disk);
    t.is((await cliDone(t, ['run', '--db', file, '--', 'true'])).code, 0);
    disk.fill();
    const again = await cliDone(t, ['run', '--db', file, '--', 'true']);
    t.is(again.code, 3, again.lines.join('\n'));
    t.regex(again.lines.join('\n'), /is full \(filesystem .*ERR_PIDFENCE_STORE_FULL/);
    disk.free();
    t.is(storeRow<{ n: number }>(file, 'SELECT COUNT(*) AS n FROM runs')?.n, 1, 'only the first run exists');
    await leftNothingBehind(t, disk, [...refused.lines, ...again.lines]);
  },
);

test.serial(
  'full disk with the reserve spent: `supervise` does not give up on failed cycles; once there is room it times the job out',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const run = await startedRun(t, file, ['--timeout', '4s', '--grace', '1s', '--', ...TERM_OBEYING]);
    const pgid = jobGroup(file, run);
    // The run's runner dies: supervise adopts the job at its start, then owns its deadline.
    interrupt(run, 'SIGKILL');
    await run.job.exited;
    const supervise = cliProcess(t, ['supervise', '--db', file, '--grace', '1s']);
    await supervise.waitForLine(/^pidfence supervise: ready$/, 20_000);
    rmSync(`${file}.reserve`, { force: true });
    disk.fill();
    // The deadline falls due at 4 s; its intent cannot be written for many cycles.
    await delay(run.startedAt + 9_000 - performance.now());
    t.is(supervise.child.exitCode, null, `supervise still runs: ${supervise.lines.join('\n')}`);
    t.true(groupMembers(pgid).length >= 2, 'no intent, no signal');
    disk.free();
    const status = await untilValue(() => (runStatusOf(file, run.runId) === 'timed_out' ? 'timed_out' : undefined), {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: 'the job timed out once there was room',
    }).catch(() => runStatusOf(file, run.runId));
    t.is(status, 'timed_out');
    await leftNothingBehind(t, disk, supervise.lines);
  },
);

test.serial(
  'full disk with the reserve spent, SIGTERM to a `supervise` holding an adopted run: nothing is signalled before the intent; once there is room it stops the job and exits drained by itself',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const run = await startedRun(t, file, ['--grace', '1s', '--', ...TERM_OBEYING]);
    const pgid = jobGroup(file, run);
    interrupt(run, 'SIGKILL');
    await run.job.exited;
    const supervise = cliProcess(t, ['supervise', '--db', file, '--grace', '1s']);
    await supervise.waitForLine(/^pidfence supervise: ready$/, 20_000);
    await until(
      () =>
        storeRow<{ n: number }>(file, "SELECT COUNT(*) AS n FROM attempt_events WHERE type = 'attempt.adopted'")?.n ===
        1,
      { timeoutMs: 10_000, what: 'supervise adopted the run' },
    );
    rmSync(`${file}.reserve`, { force: true });
    disk.fill();
    const sent = signalVerified(supervise.identity, 'SIGTERM', { group: false }).kind;
    t.is(sent, 'signalled');
    await delay(3_000);
    t.is(supervise.child.exitCode, null, `supervise waits the full disk out: ${supervise.lines.join('\n')}`);
    t.true(groupMembers(pgid).length >= 2, 'no intent, no signal');
    disk.free();
    const exit = await Promise.race([supervise.exited, delay(30_000).then(() => null)]);
    t.is(exit?.code, 0, supervise.lines.join('\n'));
    t.true(
      supervise.lines.includes('pidfence supervise: drained (1 converged, 0 remaining)'),
      supervise.lines.join('\n'),
    );
    t.is(runStatusOf(file, run.runId), 'cancelled');
    t.is(groupMembers(pgid).length, 0, 'no survivor');
    await leftNothingBehind(t, disk, supervise.lines);
  },
);

test.serial(
  'full disk, nobody holding the store: `list`, `show` and `status` still read it, exit 0, no stack trace',
  async (t) => {
    const disk = smallDisk(t);
    const file = store(disk);
    const first = await cliDone(t, ['run', '--db', file, '--json', '--', 'true']);
    t.is(first.code, 0, first.lines.join('\n'));
    const runId = storeRow<{ id: string }>(file, 'SELECT id FROM runs')?.id ?? '';
    disk.fill();
    const listed = await cliDone(t, ['list', '--db', file, '--json']);
    t.is(listed.code, 0, listed.lines.join('\n'));
    t.true(listed.lines.join('\n').includes(runId), 'the run is listed');
    const shown = await cliDone(t, ['show', runId, '--db', file]);
    t.is(shown.code, 0, shown.lines.join('\n'));
    const status = await cliDone(t, ['status', '--project', 'default', '--db', file]);
    t.is(status.code, 0, status.lines.join('\n'));
    await leftNothingBehind(t, disk, [...listed.lines, ...shown.lines, ...status.lines]);
  },
);
