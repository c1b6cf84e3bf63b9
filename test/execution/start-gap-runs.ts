// The start gap (docs/decisions/0310) on any store: a runner SIGKILLed after its attempt was written
// and its launcher spawned, before the attempt's handle was committed. Then a `cancel` or a
// `supervise` on the same host must prove that no job ever ran and end the run, and no process of
// the job may be found. The runner is held in that window by start-gap-child.ts and killed through
// its proved identity (never a bare PID); anything the job left is found by its environment mark.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { killMarkedAtEnd, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { spawnJob } from '../helpers/processes';
import { until } from '../helpers/wait';
import { cliProcess } from './cli-runs';

const CHILD = path.join(__dirname, 'start-gap-child.js');
/** A runner on a quiet machine converges in a cycle or two; this bound only keeps a defect from hanging. */
const CONVERGED_WITHIN_MS = 20_000;

/** One store as the tests see it: its `--db`, the environment its runners need, two reads. */
export interface GapStore {
  readonly db: string;
  readonly env: NodeJS.ProcessEnv;
  runStatus(runId: string): Promise<string | undefined>;
  /** The cause in the run's `attempt.terminal` event; undefined while it has none. */
  endCause(runId: string): Promise<string | undefined>;
}

export interface GapRun {
  readonly runId: string;
  readonly mark: string;
  /** The job's first act creates this file: it exists only if the job ever ran. */
  readonly ranFile: string;
}

function shellAssignments(env: NodeJS.ProcessEnv): string {
  return Object.entries(env)
    .map(([key, value]) => `${key}=${JSON.stringify(value ?? '')}`)
    .join(' ');
}

/** A runner of `store` SIGKILLed in its start window; its job, if one ever ran, is reaped at the end. */
export async function runnerKilledInStartWindow(t: ExecutionContext, store: GapStore): Promise<GapRun> {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-gap-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const ranFile = path.join(dir, 'ran');
  const mark = uniqueMark('gap');
  killMarkedAtEnd(t, mark);
  const script = `: > ${JSON.stringify(ranFile)}; exec sleep 600`;
  const runner = spawnJob(t, 'sh', [
    '-c',
    `${shellAssignments(store.env)} exec "$0" "$@" 2>&1`,
    process.execPath,
    CHILD,
    store.db,
    mark,
    script,
  ]);
  const line = await runner.waitForLine(/^paused run-[0-9a-f-]+$/, 20_000);
  const runId = line.slice('paused '.length);
  t.is(signalVerified(runner.identity, 'SIGKILL', { group: false }).kind, 'signalled');
  await runner.exited;
  return { runId, mark, ranFile };
}

/** Whether `check` holds within the bound (a defect fails the assertion that follows, it does not hang). */
async function within(check: () => Promise<boolean>): Promise<boolean> {
  return until(check, { timeoutMs: CONVERGED_WITHIN_MS, intervalMs: 100 }).then(
    () => true,
    () => false,
  );
}

/** What the run left: its status and cause, and whether any process of the job lives or ever ran. */
async function assertNeverStarted(t: ExecutionContext, store: GapStore, run: GapRun, status: string): Promise<void> {
  const ended = await within(async () => (await store.runStatus(run.runId)) === status);
  t.true(ended, `the run is ${String(await store.runStatus(run.runId))}, not ${status}`);
  t.is(await store.endCause(run.runId), 'never_started');
  t.true(await within(async () => markedProcesses(run.mark).length === 0), 'no launcher or job is left');
  t.false(existsSync(run.ranFile), 'the job never ran');
}

/** `pidfence cancel` of the run: it takes the attempt over and ends it `cancelled`, at once. */
export async function cancelEndsIt(t: ExecutionContext, store: GapStore): Promise<void> {
  const run = await runnerKilledInStartWindow(t, store);
  const cancel = cliProcess(t, ['cancel', '--db', store.db, run.runId], store.env);
  const exit = await cancel.exited;
  t.is(exit.code, 0, cancel.lines.join('\n'));
  t.deepEqual(cancel.lines, [
    `cancel requested for ${run.runId}; its runner was gone, so this command stopped the job itself (cancelled)`,
  ]);
  await assertNeverStarted(t, store, run, 'cancelled');
}

/** A `supervise` started afterwards adopts the attempt and ends the run `failed` (never started). */
export async function superviseEndsIt(t: ExecutionContext, store: GapStore): Promise<void> {
  const run = await runnerKilledInStartWindow(t, store);
  const supervise = cliProcess(t, ['supervise', '--db', store.db, '--grace', '300ms'], store.env);
  await assertNeverStarted(t, store, run, 'failed');
  t.is(signalVerified(supervise.identity, 'SIGTERM', { group: false }).kind, 'signalled');
  t.is((await supervise.exited).code, 0);
}
