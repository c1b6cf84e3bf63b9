// Issue 28 item 4 (docs/decisions/0162): a SIGTERM or SIGINT (or SIGHUP, for `run`) that reaches
// `supervise` or `run` at any moment of its start-up ends in the same drained exit as one that comes
// later. The hold is seen by a preload (test/helpers/hold-marker.ts) at the program's first SIGTERM
// listener, and must come before the store is touched; each trial then signals a fresh process at its own delay after its hold, spread over
// the whole start-up that follows and past the moment it is ready.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { captureIdentity, signalVerified } from '../../lib/native/index';
import { CLI } from '../execution/cli-runs';
import { spawnJob, type Job } from '../helpers/processes';
import { delay } from '../helpers/wait';
import { tempDir } from './pidfence-process';

const HOLD_MARKER = path.resolve(__dirname, '..', 'helpers', 'hold-marker.js');

interface Trial {
  readonly job: Job;
  /** Created by the preload at the program's first SIGTERM listener: its hold. */
  readonly marker: string;
}

/** `pidfence <args>` with the hold-marker preload. */
function traceHold(t: ExecutionContext, dir: string, name: string, args: readonly string[], store?: string): Trial {
  const marker = path.join(dir, `${name}.held`);
  const storeEnv = store === undefined ? '' : `PIDFENCE_TEST_HOLD_STORE=${JSON.stringify(store)} `;
  const job = spawnJob(t, 'sh', [
    '-c',
    `${storeEnv}PIDFENCE_TEST_HOLD_MARKER=${JSON.stringify(marker)} exec "$0" "$@" 2>&1`,
    process.execPath,
    '--require',
    HOLD_MARKER,
    CLI,
    ...args,
  ]);
  return { job, marker };
}

/** Waits (polling every millisecond) until the program holds its stop signals. */
async function heldFrom(trial: Trial, timeoutMs = 30_000): Promise<void> {
  const started = performance.now();
  while (!existsSync(trial.marker)) {
    if (performance.now() - started > timeoutMs || trial.job.child.exitCode !== null)
      throw new Error(`the signals were never held: ${JSON.stringify(trial.job.lines)}`);
    await delay(1);
  }
}

/**
 * PARALLEL unsignalled starts of `args(i)`: how long after the hold start-up lasts until `ready`;
 * and, for each, whether its store file existed when the hold was seen (it must not: the hold is the
 * entry's first import, before any start-up work). Each is then drained by SIGTERM.
 */
async function startUpAfterHold(
  t: ExecutionContext,
  dir: string,
  args: (i: number) => readonly string[],
  store: (i: number) => string,
  ready: RegExp,
): Promise<{ afterHoldMs: number; storeBeforeHold: number }> {
  const probes = await Promise.all(
    Array.from({ length: PARALLEL }, async (_, i) => {
      const trial = traceHold(t, dir, `probe${i}`, args(i), store(i));
      await heldFrom(trial);
      // Seen by the process itself at its hold (looking from here would race its start-up).
      const storeExisted = readFileSync(trial.marker, 'utf8') !== 'none';
      const heldAt = performance.now();
      const { job } = trial;
      await job.waitForLine(ready, 30_000);
      const afterHoldMs = performance.now() - heldAt;
      signalLeader(job, 'SIGTERM');
      await job.exited;
      return { afterHoldMs, storeExisted };
    }),
  );
  return {
    afterHoldMs: Math.max(...probes.map((probe) => probe.afterHoldMs)),
    storeBeforeHold: probes.filter((probe) => probe.storeExisted).length,
  };
}

/** The delays of `trials` trials, evenly spread from `from` to `to` ms. */
function spreadDelays(trials: number, from: number, to: number): number[] {
  return Array.from({ length: trials }, (_, i) => Math.round(from + ((to - from) * i) / (trials - 1)));
}

/** Runs `trial` for every delay, `parallel` at a time; the failures, one line each. */
async function inBatches(
  delays: readonly number[],
  parallel: number,
  trial: (delayMs: number, index: number) => Promise<string | null>,
): Promise<string[]> {
  const failures: string[] = [];
  for (let i = 0; i < delays.length; i += parallel) {
    const batch = delays.slice(i, i + parallel).map((delayMs, j) => trial(delayMs, i + j));
    for (const failure of await Promise.all(batch)) if (failure !== null) failures.push(failure);
  }
  return failures;
}

/** Trials at once (two cores here). */
const PARALLEL = 3;

function signalLeader(job: Job, signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP'): void {
  signalVerified(job.identity, signal, { group: false });
}

test('SIGTERM/SIGINT at 60 moments of supervise start-up, from the hold on: every one ends in a drain and exit 0', async (t) => {
  t.timeout(240_000);
  const dir = tempDir(t);
  // Unsignalled starts, as many at once as the trials: the hold comes first, then the start-up.
  const probe = await startUpAfterHold(
    t,
    dir,
    (i) => ['supervise', '--db', path.join(dir, `probe${i}.db`)],
    (i) => path.join(dir, `probe${i}.db`),
    /^pidfence supervise: ready$/,
  );
  t.is(probe.storeBeforeHold, 0, 'the signals are held before the store is touched');
  // Each trial waits for its own hold, then signals at its point of what follows.
  const delays = spreadDelays(60, 0, probe.afterHoldMs * 1.2);
  const failures = await inBatches(delays, PARALLEL, async (delayMs, index) => {
    const trial = traceHold(t, dir, `s${index}`, ['supervise', '--db', path.join(dir, `s${index}.db`)]);
    const { job } = trial;
    await heldFrom(trial);
    await delay(delayMs);
    signalLeader(job, index % 2 === 0 ? 'SIGTERM' : 'SIGINT');
    const exit = await job.exited;
    const drained = job.lines.some((line) => /^pidfence supervise: drained/.test(line));
    return exit.code === 0 && drained
      ? null
      : `at ${delayMs} ms after the hold: exit ${exit.code ?? exit.signal}, ${JSON.stringify(job.lines)}`;
  });
  t.log(
    `start-up after the hold ${Math.round(probe.afterHoldMs)} ms; signals from 0 to ${Math.round(probe.afterHoldMs * 1.2)} ms after it`,
  );
  t.deepEqual(failures, []);
});

/** Processes whose command line holds `marker` (the trial's job), as verified identities. */
function jobsWith(marker: string): Array<NonNullable<ReturnType<typeof captureIdentity>>> {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmdline.split('\0').includes(marker)) continue;
    const identity = captureIdentity(Number(entry));
    if (identity !== null) found.push(identity);
  }
  return found;
}

/** `run` also stops on SIGHUP (its terminal closed): the trials take the three in turn. */
const RUN_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

test('SIGTERM/SIGINT/SIGHUP at 30 moments of run start-up, from the hold on: the run is refused or its job stopped, never a killed runner or a job left behind', async (t) => {
  t.timeout(240_000);
  const dir = tempDir(t);
  const probe = await startUpAfterHold(
    t,
    dir,
    (i) => ['run', '--db', path.join(dir, `probe${i}.db`), '--grace', '300ms', '--', 'sleep', '30'],
    (i) => path.join(dir, `probe${i}.db`),
    /run run-[0-9a-f-]+ started/,
  );
  t.is(probe.storeBeforeHold, 0, 'the signals are held before the store is touched');
  const delays = spreadDelays(30, 0, probe.afterHoldMs * 1.2);
  const failures = await inBatches(delays, PARALLEL, async (delayMs, index) => {
    // A unique sleep length marks this trial's job among the machine's processes.
    const marker = `30.${String(index).padStart(3, '0')}`;
    const trial = traceHold(t, dir, `r${index}`, [
      'run',
      '--db',
      path.join(dir, `r${index}.db`),
      '--grace',
      '300ms',
      '--',
      'sleep',
      marker,
    ]);
    const { job } = trial;
    await heldFrom(trial);
    await delay(delayMs);
    signalLeader(job, RUN_SIGNALS[index % RUN_SIGNALS.length] ?? 'SIGTERM');
    const exit = await job.exited;
    const left = jobsWith(marker);
    for (const identity of left) signalVerified(identity, 'SIGKILL', { group: true });
    const refused = job.lines.some((line) =>
      /was not admitted \(.*\): pidfence was already stopping, so nothing was started/.test(line),
    );
    const stopped = job.lines.some((line) => /^pidfence: run run-[0-9a-f-]+ cancelled/.test(line));
    if (exit.signal === null && (refused || stopped) && left.length === 0) return null;
    return `at ${delayMs} ms after the hold: exit ${exit.code ?? exit.signal}, ${left.length} job process(es) left, ${JSON.stringify(job.lines)}`;
  });
  t.log(
    `start-up after the hold ${Math.round(probe.afterHoldMs)} ms; signals from 0 to ${Math.round(probe.afterHoldMs * 1.2)} ms after it`,
  );
  t.deepEqual(failures, []);
});
