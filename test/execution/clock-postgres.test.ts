// Issue 28 item 1, the PostgreSQL profile (design/postgres §D3, docs/decisions/0190): deadlines,
// leases and retries are on the database clock, so a ±1 day step of a runner host's wall clock (the
// clock-step shim; the machine's clock untouched) changes no outcome of a real `pidfence run`; and a
// receipt whose launcher's wall clock stepped is judged against a cancel by its boot-clock finish.
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import {
  CompletionProcessor,
  createReceiptToken,
  receiptTokenDigest,
  writeReceiptAtomic,
  type CompletionReceiptV2,
} from '../../lib/execution/index';
import { bootNow } from '../../lib/native/index';
import { openPostgresStore } from '../../lib/store/postgres/index';
import { clockStep, DAY_MS } from '../helpers/clock-step';
import { handleGroup, reapGroupAtEnd } from '../helpers/job-groups';
import { migratedDatabaseForFile, type MigratedDatabase } from '../helpers/pg-store';
import { receiptsDirectory } from '../helpers/temp-file';
import { delay, untilValue } from '../helpers/wait';
import { cliProcess, grantCancelOnPostgres } from './cli-runs';
import { cliDone, runEnd, type StartedRun } from './clock-runs';

const ready = migratedDatabaseForFile(test, 'pgclock');

function receiptsDir(t: ExecutionContext): string {
  return receiptsDirectory(t, 'pidfence-pgclock-');
}

async function ownerRow<R>(db: MigratedDatabase, text: string, values: unknown[]): Promise<R | undefined> {
  return (await db.owner.query(text, values)).rows[0] as R | undefined;
}

async function pgRun(
  t: ExecutionContext,
  db: MigratedDatabase,
  receipts: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<StartedRun> {
  const job = cliProcess(t, ['run', '--db', db.runtimeUrl, ...args], { PIDFENCE_RECEIPTS: receipts, ...env });
  const line = await job.waitForLine(/run (run-[0-9a-f-]+) started/, 20_000);
  const startedAt = performance.now();
  const runId = /run (run-[0-9a-f-]+) started/.exec(line)?.[1] ?? '';
  const handle = await untilValue(
    async () =>
      (await ownerRow<{ handle: string | null }>(db, 'SELECT handle FROM attempts WHERE run_id = $1', [runId]))
        ?.handle ?? undefined,
    { what: 'the handle' },
  );
  reapGroupAtEnd(t, handleGroup(handle));
  return { job, runId, startedAt };
}

async function statusOf(db: MigratedDatabase, runId: string): Promise<string | undefined> {
  return (await ownerRow<{ status: string }>(db, 'SELECT status FROM runs WHERE id = $1', [runId]))?.status;
}

function quarantinedIn(receipts: string): string[] {
  const dir = path.join(receipts, 'quarantine');
  return existsSync(dir) ? readdirSync(dir) : [];
}

test.serial(
  'postgres, clock +1 day at 2 s: `run --timeout 10m -- sleep 6` is not killed early and succeeds',
  async (t) => {
    const db = await ready;
    const receipts = receiptsDir(t);
    const clock = clockStep(t);
    const run = await pgRun(t, db, receipts, ['--timeout', '10m', '--grace', '300ms', '--', 'sleep', '6'], clock.env);
    await delay(run.startedAt + 2_000 - performance.now());
    clock.step(DAY_MS);
    const end = await runEnd(run);
    t.is(end.status, 'succeeded', run.job.lines.join('\n'));
    t.true(end.afterMs >= 5_500, `ran its 6 s (${Math.round(end.afterMs)} ms)`);
    t.is(await statusOf(db, run.runId), 'succeeded');
    t.deepEqual(quarantinedIn(receipts), []);
  },
);

test.serial('postgres, clock −1 day at 2 s: `run -- sleep 4` succeeds; nothing is quarantined', async (t) => {
  const db = await ready;
  const receipts = receiptsDir(t);
  const clock = clockStep(t);
  const run = await pgRun(t, db, receipts, ['--grace', '300ms', '--', 'sleep', '4'], clock.env);
  await delay(run.startedAt + 2_000 - performance.now());
  clock.step(-DAY_MS);
  const end = await runEnd(run);
  t.is(end.status, 'succeeded', run.job.lines.join('\n'));
  t.is(await statusOf(db, run.runId), 'succeeded');
  t.deepEqual(quarantinedIn(receipts), []);
});

test.serial(
  'postgres, runner clock −1 day, a cancel on the real clock: TERM goes out at once and the run ends cancelled',
  async (t) => {
    const db = await ready;
    await grantCancelOnPostgres(db.ownerUrl, db.runtimeRole);
    const receipts = receiptsDir(t);
    const clock = clockStep(t);
    const run = await pgRun(t, db, receipts, ['--grace', '300ms', '--', 'sleep', '60'], clock.env);
    clock.step(-DAY_MS);
    await delay(1_500);
    const cancelled = await cliDone(t, ['cancel', '--db', db.runtimeUrl, run.runId], { PIDFENCE_RECEIPTS: receipts });
    t.is(cancelled.code, 0, cancelled.lines.join('\n'));
    const cancelAt = performance.now();
    const end = await Promise.race([runEnd(run), delay(15_000).then(() => null)]);
    t.is(end?.status, 'cancelled', run.job.lines.join('\n'));
    t.true(performance.now() - cancelAt < 5_000, 'within a cadence and the grace');
  },
);

/** A v2 receipt of this boot, finished `finishedAgoMs` ago on the boot clock, its wall times off by `wallOffsetMs`. */
function steppedReceipt(
  runId: string,
  attemptId: string,
  token: string,
  exit: { exitCode: number | null; signal: string | null },
  finishedAgoMs: number,
  wallOffsetMs: number,
): CompletionReceiptV2 {
  const now = bootNow();
  if (now === null) throw new Error('the boot clock needs the addon');
  const wall = Date.now() + wallOffsetMs;
  return {
    v: 2,
    runId,
    attemptId,
    seq: 1,
    token,
    ...exit,
    spawnFailed: false,
    leftovers: 0,
    bootId: now.bootId,
    startedAtMs: wall - finishedAgoMs - 1_000,
    finishedAtMs: wall - finishedAgoMs,
    startedBootMs: now.bootMs - finishedAgoMs - 1_000,
    finishedBootMs: now.bootMs - finishedAgoMs,
  };
}

test.serial(
  "postgres: a receipt whose launcher's wall clock stepped a day is judged against the cancel by its boot-clock finish",
  async (t) => {
    const db = await ready;
    const store = await openPostgresStore(db.runtimeUrl, { maxConnections: 2 });
    t.teardown(() => store.close());
    const receipts = receiptsDir(t);
    const processor = new CompletionProcessor({
      runStore: store.runStore,
      executionStore: store.executionStore,
      receiptDirectory: receipts,
    });
    // −1 day: TERM ended the job after the cancel; the wall finish would say "before the cancel", i.e. failed.
    // +1 day: the job succeeded 3 s before the cancel; the wall finish would say "after the cancel", i.e. cancelled.
    const cases = [
      { wallOffsetMs: -DAY_MS, exit: { exitCode: null, signal: 'SIGTERM' }, cancelFirst: true, expected: 'cancelled' },
      { wallOffsetMs: DAY_MS, exit: { exitCode: 0, signal: null }, cancelFirst: false, expected: 'succeeded' },
    ] as const;
    for (const { wallOffsetMs, exit, cancelFirst, expected } of cases) {
      const runId = `run-${randomUUID()}`;
      const attemptId = `${runId}-a1`;
      const token = createReceiptToken();
      await store.runStore.createRun({ runId, projectId: 'p1' });
      await store.runStore.createAttempt({ runId, attemptId, receiptTokenDigest: receiptTokenDigest(token) });
      if (cancelFirst)
        await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      // After a cancel the job ran on 200 ms until TERM ended it; without, it finished 3 s before the cancel below.
      if (cancelFirst) await delay(400);
      writeReceiptAtomic(
        receipts,
        steppedReceipt(runId, attemptId, token, exit, cancelFirst ? 200 : 3_000, wallOffsetMs),
      );
      if (!cancelFirst)
        await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      t.like(
        await processor.process({ runId, attemptId }),
        { kind: 'completed', status: expected, cause: 'receipt' },
        `wall clock ${wallOffsetMs > 0 ? '+' : '−'}1 day`,
      );
    }
  },
);
