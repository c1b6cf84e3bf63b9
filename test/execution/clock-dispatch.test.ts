// Issue 28 item 1 (docs/decisions/0160, 0190): leases and backoff on a SQLite store are measured on the
// store clock, not on a process's wall clock. A second process whose wall clock is a day off (the
// clock-step shim) neither takes a live lease early nor waits a day for an expired one, and a retry
// written before a −1 day step falls due after its delay. Real processes on a real file.
import { randomUUID } from 'node:crypto';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { createLeaseToken } from '../../lib/contract/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import { clockStep, DAY_MS, type ClockStep } from '../helpers/clock-step';
import { spawnJob, type Job } from '../helpers/processes';
import { storeFile } from './clock-runs';

const CHILD = path.join(__dirname, 'clock-step-child.js');

interface Target {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
}

/** A run with an attempt (no process: the lease and the retry are what is looked at) and user cancel intent. */
async function cancelledRun(t: ExecutionContext): Promise<{ file: string; store: SqliteStore; target: Target }> {
  const file = storeFile(t, 'pidfence-clock-dispatch-');
  const store = openSqliteStore(file);
  t.teardown(() => store.close());
  const runId = `run-${randomUUID()}`;
  const attemptId = `${runId}-a1`;
  await store.runStore.createRun({ runId, projectId: 'p1' });
  await store.runStore.createAttempt({ runId, attemptId });
  const intent = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
  if (intent.kind !== 'requested' || intent.run.cancelRequestedAtMs === null)
    throw new Error(`no intent: ${intent.kind}`);
  return { file, store, target: { runId, attemptId, cancelRequestedAtMs: intent.run.cancelRequestedAtMs } };
}

function child(t: ExecutionContext, clock: ClockStep, mode: string, file: string, target: Target, forMs: number): Job {
  const env = Object.entries(clock.env)
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .join(' ');
  return spawnJob(t, 'sh', [
    '-c',
    `${env} exec "$0" "$@"`,
    process.execPath,
    CHILD,
    mode,
    file,
    target.runId,
    target.attemptId,
    String(target.cancelRequestedAtMs),
    String(forMs),
  ]);
}

/** The milliseconds on the child's first line of `kind`, or null. */
function msOf(job: Job, kind: string): number | null {
  const line = job.lines.find((text) => text.startsWith(`${kind} `));
  return line === undefined ? null : Number(line.split(' ')[1]);
}

test("lease, clock −1 day: a second process waits out another's lease on the store clock, not for a day", async (t) => {
  const { file, store, target } = await cancelledRun(t);
  // Read before the claim: the lease starts no earlier, so "after the lease" is measured from a lower bound.
  const claimedAt = performance.now();
  const first = await store.dispatchRepository.claim({
    ...target,
    owner: 'first',
    token: createLeaseToken(),
    leaseDurationMs: 2_000,
  });
  t.is(first.kind, 'claimed');
  const second = child(t, clockStep(t, -DAY_MS), 'claim-loop', file, target, 10_000);
  await second.exited;
  const waited = performance.now() - claimedAt;
  t.not(msOf(second, 'leased'), null, `the live lease was respected first: ${second.lines.join(' | ')}`);
  t.not(msOf(second, 'claimed'), null, `the expired lease was claimed: ${second.lines.join(' | ')}`);
  t.true(
    waited >= 2_000 && waited < 6_000,
    `claimed after the 2 s lease (${Math.round(waited)} ms after the first claim began)`,
  );
});

test("lease, clock +1 day: a second process does not take another's live lease early", async (t) => {
  const { file, store, target } = await cancelledRun(t);
  const claimedAt = performance.now();
  const first = await store.dispatchRepository.claim({
    ...target,
    owner: 'first',
    token: createLeaseToken(),
    leaseDurationMs: 3_000,
  });
  t.is(first.kind, 'claimed');
  const second = child(t, clockStep(t, DAY_MS), 'claim-loop', file, target, 10_000);
  await second.exited;
  const waited = performance.now() - claimedAt;
  t.not(msOf(second, 'leased'), null, `refused while the lease lived: ${second.lines.join(' | ')}`);
  t.true(waited >= 3_000, `claimed only after the 3 s lease (${Math.round(waited)} ms after the first claim began)`);
});

test('backoff, clock −1 day after a retry was written: the retry falls due after its 1 s delay', async (t) => {
  const { file, target } = await cancelledRun(t);
  const clock = clockStep(t);
  const runner = child(t, clock, 'backoff', file, target, 10_000);
  await runner.waitForLine(/^settled$/, 15_000);
  clock.step(-DAY_MS);
  await runner.exited;
  t.true(runner.lines.includes('stepped'), runner.lines.join(' | '));
  const ms = msOf(runner, 'claimed');
  t.not(ms, null, `the retry was claimed again: ${runner.lines.join(' | ')}`);
  t.true(ms !== null && ms >= 900 && ms < 5_000, `after the 1 s backoff (${String(ms)} ms after the settle)`);
});
