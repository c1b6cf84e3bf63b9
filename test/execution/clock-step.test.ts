// Issue 28 item 1 (docs/decisions/0160, 0161, 0190): a ±1 day step of the wall clock of the runner
// and its job (an NTP step, a router's first sync; the LD_PRELOAD shim of test/fixtures/clock-step.c,
// the machine's clock untouched) changes no outcome: no early kill, no stalled stop or adoption,
// no success turned into a failure, no quarantined receipt; a second runner and processes started
// after the step agree with the first on one store clock. Real CLI, real processes, a real file.
import test from 'ava';

import { signalVerified } from '../../lib/native/index';
import { clockStep, DAY_MS } from '../helpers/clock-step';
import { delay, until } from '../helpers/wait';
import { cliProcess } from './cli-runs';
import { cliDone, grantCancelThroughCli, quarantined, runEnd, runStatusOf, startedRun, storeFile } from './clock-runs';

/** Waits until `ms` after the run said it started. */
async function atMs(run: { readonly startedAt: number }, ms: number): Promise<void> {
  await delay(run.startedAt + ms - performance.now());
}

test('clock +1 day at 2 s: `run --timeout 10m -- sleep 6` is not killed early and succeeds', async (t) => {
  const file = storeFile(t);
  const clock = clockStep(t);
  const run = await startedRun(t, file, ['--timeout', '10m', '--grace', '300ms', '--', 'sleep', '6'], clock.env);
  await atMs(run, 2_000);
  clock.step(DAY_MS);
  const end = await runEnd(run);
  t.is(end.status, 'succeeded', run.job.lines.join('\n'));
  t.is(end.code, 0);
  t.true(end.afterMs >= 5_500, `the job ran its 6 s (ended after ${Math.round(end.afterMs)} ms)`);
  t.is(runStatusOf(file, run.runId), 'succeeded');
});

test('clock −1 day at 2 s: `run -- sleep 4` succeeds; nothing is failed, lost or quarantined', async (t) => {
  const file = storeFile(t);
  const clock = clockStep(t);
  const run = await startedRun(t, file, ['--grace', '300ms', '--', 'sleep', '4'], clock.env);
  await atMs(run, 2_000);
  clock.step(-DAY_MS);
  const end = await runEnd(run);
  t.is(end.status, 'succeeded', run.job.lines.join('\n'));
  t.is(end.code, 0);
  t.is(runStatusOf(file, run.runId), 'succeeded');
  t.deepEqual(quarantined(file), [], 'no receipt was judged impossible');
});

test('clock −1 day, then a cancel written on the real clock: the runner sends TERM at once', async (t) => {
  const file = storeFile(t);
  await grantCancelThroughCli(t, file);
  const clock = clockStep(t);
  const run = await startedRun(t, file, ['--grace', '300ms', '--', 'sleep', '60'], clock.env);
  clock.step(-DAY_MS);
  // Two cadences on the stepped clock before the cancel arrives.
  await delay(2_000);
  const cancelled = await cliDone(t, ['cancel', '--db', file, run.runId]);
  t.is(cancelled.code, 0, cancelled.lines.join('\n'));
  const cancelAt = performance.now();
  const end = await Promise.race([runEnd(run), delay(15_000).then(() => null)]);
  t.not(end, null, 'the run ended within 15 s of the cancel');
  t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
  t.true(performance.now() - cancelAt < 5_000, 'TERM went out within a cadence and the grace');
});

test('clock −1 day, then a runner killed: `supervise` still adopts its job on the cleanup period and times it out', async (t) => {
  const file = storeFile(t);
  const clock = clockStep(t);
  const supervise = cliProcess(t, ['supervise', '--db', file, '--grace', '300ms'], clock.env);
  await supervise.waitForLine(/^pidfence supervise: ready$/, 20_000);
  const run = await startedRun(t, file, ['--timeout', '5s', '--grace', '300ms', '--', 'sleep', '120'], clock.env);
  clock.step(-DAY_MS);
  await delay(500);
  t.is(signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind, 'signalled');
  await run.job.exited;
  // The standalone cleanup period is 60 s from supervise's first cycle; then the 5 s deadline is past.
  const waited = await until(() => runStatusOf(file, run.runId) === 'timed_out', {
    timeoutMs: 90_000,
    intervalMs: 250,
    what: 'the orphan adopted and timed out',
  }).catch(() => null);
  t.not(waited, null, `still ${runStatusOf(file, run.runId)} after 90 s`);
  t.true(
    supervise.lines.some((line) => line.includes(`stopped ${run.runId}`)),
    supervise.lines.join('\n'),
  );
});

test("second actor: one runner's clock jumps +1 day while another runs on the store; deadlines stay each one's own, and a cancel written on the stepped clock stops the other's job at once", async (t) => {
  const file = storeFile(t);
  await grantCancelThroughCli(t, file);
  const clock = clockStep(t);
  const [stepped, steady] = await Promise.all([
    startedRun(t, file, ['--timeout', '6s', '--grace', '300ms', '--', 'sleep', '60'], clock.env),
    startedRun(t, file, ['--grace', '300ms', '--', 'sleep', '60']),
  ]);
  await atMs(stepped, 1_500);
  clock.step(DAY_MS);
  await atMs(stepped, 2_500);
  // `cancel` started after the step, on the stepped clock: its intent is on the one store clock.
  const cancelled = await cliDone(t, ['cancel', '--db', file, steady.runId], clock.env);
  t.is(cancelled.code, 0, cancelled.lines.join('\n'));
  const cancelAt = performance.now();
  const steadyEnd = await Promise.race([runEnd(steady), delay(15_000).then(() => null)]);
  t.is(steadyEnd?.status, 'cancelled', `the steady runner stopped its job: ${steady.job.lines.join('\n')}`);
  t.true(performance.now() - cancelAt < 5_000, 'within a cadence and the grace of the cancel');
  const steppedEnd = await runEnd(stepped);
  t.is(steppedEnd.status, 'timed_out', stepped.job.lines.join('\n'));
  t.true(
    steppedEnd.afterMs >= 5_500,
    `the stepped runner kept its 6 s deadline (ended after ${Math.round(steppedEnd.afterMs)} ms)`,
  );
  t.true(steppedEnd.afterMs < 12_000, 'and stopped the job on time');
});
