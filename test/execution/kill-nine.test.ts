// Issue 28 (kept from the first trial, docs/decisions/0192): SIGKILL of the runner, the
// launcher or both, at 60 moments spread over a `run` and the `cancel` that stops it. Every time:
// the run ends `cancelled` (or `failed` when the launcher died before the job began, so the run had
// ended before the cancel came: the cancel then says so), no process of the job's group is left, no
// dispatch is blocked, and SQLite's integrity check is ok. Whatever the kill leaves, the cancel that follows (it takes over
// an orphan) or a `supervise` started afterwards converges it. With only one of the two killed, the
// stop reaches the job before its own end; with both killed before the TERM, the job's processes
// have no leader and no holder left, so nothing can prove them (the group is unproven, never
// signalled on a guess) and they end by themselves: the run converges then.
import test, { type ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { handleExpectedIdentity, parseHandle } from '../../lib/process/index';
import { groupMembers, handleGroup } from '../helpers/job-groups';
import { delay, until } from '../helpers/wait';
import { cliProcess } from './cli-runs';
import { cliDone, runStatusOf, startedRun, storeFile, storeRow } from './clock-runs';

type Target = 'runner' | 'launcher' | 'both';

/** Trials per target; the three targets make the 60 moments. */
const TRIALS = 20;
const PARALLEL = 4;
/** The cancel goes out this long after the run said "started"; the kills spread over [0, SPREAD_MS]. */
const CANCEL_AT_MS = 400;
const SPREAD_MS = 1_500;
/** The job's own length: a run that converged before it was stopped, not ended by itself. */
const JOB_SECONDS = 15;
/** One target killed: past one stop's lease for a `run` (4.8 s with a 300 ms grace) and a supervise start, before the job's end. */
const STOPPED_WITHIN_MS = 12_000;
/** Both killed: the job's own end, and the cadence that sees it. */
const CONVERGED_WITHIN_MS = 25_000;

function integrityOk(file: string): boolean {
  return storeRow<{ integrity_check: string }>(file, 'PRAGMA integrity_check')?.integrity_check === 'ok';
}

/** One trial; a failure as one line, null when it held. */
async function trial(t: ExecutionContext, target: Target, killAtMs: number): Promise<string | null> {
  const file = storeFile(t, 'pidfence-kill9-');
  const run = await startedRun(t, file, ['--grace', '300ms', '--', 'sleep', String(JOB_SECONDS)]);
  const handle =
    storeRow<{ handle: string }>(file, 'SELECT handle FROM attempts WHERE run_id = ?', run.runId)?.handle ?? '';
  const pgid = handleGroup(handle);
  const launcher = handleExpectedIdentity(parseHandle(handle));
  const cancel = delay(CANCEL_AT_MS).then(() => cliDone(t, ['cancel', '--db', file, run.runId]));
  await delay(killAtMs);
  if (target !== 'launcher') signalVerified(run.job.identity, 'SIGKILL', { group: false });
  if (target !== 'runner') signalVerified(launcher, 'SIGKILL', { group: false });
  const cancelled = await cancel;
  // The launcher killed before it started the job: nothing ran, the run ended `failed` before the cancel.
  const endedFirst = cancelled.code === 4 && cancelled.lines.some((line) => line.includes('ERR_PIDFENCE_RUN_FINISHED'));
  if (cancelled.code !== 0 && !endedFirst)
    return `${target}@${killAtMs}: cancel exited ${String(cancelled.code)}: ${cancelled.lines.join(' | ')}`;
  const expected = endedFirst ? 'failed' : 'cancelled';
  // Whatever is left over is this host's supervise's to converge (it adopts runners proved gone).
  const supervise = cliProcess(t, ['supervise', '--db', file, '--grace', '300ms']);
  const within = (target === 'both' ? CONVERGED_WITHIN_MS : STOPPED_WITHIN_MS) - (performance.now() - run.startedAt);
  const converged = await until(() => runStatusOf(file, run.runId) === expected && groupMembers(pgid).length === 0, {
    timeoutMs: Math.max(0, within),
    intervalMs: 100,
  }).then(
    () => true,
    () => false,
  );
  signalVerified(supervise.identity, 'SIGTERM', { group: false });
  await supervise.exited;
  await run.job.exited;
  const blocked = storeRow<{ n: number }>(
    file,
    "SELECT COUNT(*) AS n FROM cancellation_dispatches WHERE status = 'blocked'",
  )?.n;
  const problems = [
    ...(converged
      ? []
      : [
          `after ${Math.round(performance.now() - run.startedAt)} ms: status ${String(runStatusOf(file, run.runId))} (expected ${expected}), ${groupMembers(pgid).length} of the group alive`,
        ]),
    ...(blocked === 0 ? [] : [`${String(blocked)} blocked dispatch(es)`]),
    ...(integrityOk(file) ? [] : ['integrity_check failed']),
  ];
  return problems.length === 0 ? null : `${target}@${killAtMs}ms: ${problems.join('; ')}`;
}

async function trials(t: ExecutionContext, target: Target): Promise<void> {
  const moments = Array.from({ length: TRIALS }, (_, i) => Math.round((SPREAD_MS * i) / (TRIALS - 1)));
  const failures: string[] = [];
  for (let i = 0; i < moments.length; i += PARALLEL) {
    const batch = await Promise.all(moments.slice(i, i + PARALLEL).map((ms) => trial(t, target, ms)));
    failures.push(...batch.filter((failure): failure is string => failure !== null));
  }
  t.deepEqual(failures, [], `${failures.length} of ${TRIALS} trials did not hold`);
}

test.serial(
  'kill -9 of the runner at 20 moments of run/cancel: cancelled every time, no survivor, nothing blocked, integrity ok',
  async (t) => {
    await trials(t, 'runner');
  },
);

test.serial(
  'kill -9 of the launcher at 20 moments of run/cancel: cancelled every time, no survivor, nothing blocked, integrity ok',
  async (t) => {
    await trials(t, 'launcher');
  },
);

test.serial(
  'kill -9 of runner and launcher at 20 moments of run/cancel: cancelled every time, no survivor, nothing blocked, integrity ok',
  async (t) => {
    await trials(t, 'both');
  },
);

test.serial(
  "a run SIGKILLed while its stop waits out the grace: supervise takes the stop over after one stop's lease (seconds), not a page's (minutes)",
  async (t) => {
    const file = storeFile(t, 'pidfence-kill9-lease-');
    // A TERM-ignoring job and a 2 s grace: the runner dies holding the dispatch lease, between TERM and KILL.
    const run = await startedRun(t, file, ['--grace', '2s', '--', 'sh', '-c', 'trap "" TERM; sleep 120']);
    const pgid = handleGroup(
      storeRow<{ handle: string }>(file, 'SELECT handle FROM attempts WHERE run_id = ?', run.runId)?.handle ?? '',
    );
    const cancelled = await cliDone(t, ['cancel', '--db', file, run.runId]);
    t.is(cancelled.code, 0, cancelled.lines.join('\n'));
    await until(
      () =>
        storeRow<{ owner: string | null }>(
          file,
          'SELECT lease_owner AS owner FROM cancellation_dispatches WHERE run_id = ?',
          run.runId,
        )?.owner != null,
      { timeoutMs: 5_000, intervalMs: 20, what: 'the runner claimed the stop' },
    );
    await delay(300);
    t.is(signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind, 'signalled');
    await run.job.exited;
    const killedAt = performance.now();
    const supervise = cliProcess(t, ['supervise', '--db', file, '--grace', '300ms']);
    // One stop's lease for a 2 s grace: 2 s + 2.5 s KILL confirmation and overhead + 1 s + 1 s margins.
    const stopped = await until(() => runStatusOf(file, run.runId) === 'cancelled' && groupMembers(pgid).length === 0, {
      timeoutMs: 20_000,
      intervalMs: 100,
    }).then(
      () => true,
      () => false,
    );
    t.true(
      stopped,
      `still ${String(runStatusOf(file, run.runId))} ${Math.round(performance.now() - killedAt)} ms after the runner died`,
    );
    signalVerified(supervise.identity, 'SIGTERM', { group: false });
    await supervise.exited;
  },
);
