// The start window (docs/decisions/0310): a runner killed after its attempt is `starting` and before
// the handle that proves its launcher is stored. The crash point parks the production handle commit
// (the real `pidfence run` on a real PostgreSQL database); the runner is then SIGKILLed. A job
// starts only once its handle is stored, so the launcher, left without its order, exits and starts
// nothing, and the next runner ends the run `failed` (never_started) instead of leaving it active,
// unproven, for ever.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { crashPointAtHandleCommit } from '../helpers/pg-crash-point';
import { migratedDatabaseForFile, type MigratedDatabase } from '../helpers/pg-store';
import { killMarkedAtEnd, markedProcesses, MARK_ENV, uniqueMark } from '../helpers/marked-processes';
import { delay, until, untilValue } from '../helpers/wait';
import { cliProcess } from './cli-runs';

const ready = migratedDatabaseForFile(test, 'startwin');

function scratch(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-startwin-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function ownerRow<R>(db: MigratedDatabase, text: string, values: unknown[]): Promise<R | undefined> {
  return (await db.owner.query(text, values)).rows[0] as R | undefined;
}

test.serial(
  'a runner killed while its handle commit is parked starts no job: its launcher exits without an order, and supervise ends the run failed (never_started)',
  async (t) => {
    const db = await ready;
    const dir = scratch(t);
    const receipts = path.join(dir, 'receipts');
    const marker = path.join(dir, 'job-started');
    const mark = uniqueMark('startwin');
    killMarkedAtEnd(t, mark);
    const crash = await crashPointAtHandleCommit(db.admin);
    t.teardown(() => crash.remove());

    const runner = cliProcess(
      t,
      [
        'run',
        '--db',
        db.runtimeUrl,
        '--grace',
        '300ms',
        '--',
        'sh',
        '-c',
        `echo started > "${marker}"; exec sleep 3600`,
      ],
      { PIDFENCE_RECEIPTS: receipts, [MARK_ENV]: mark },
    );
    const parked = await crash.parked();
    const runId = await untilValue(
      async () =>
        (await ownerRow<{ run_id: string }>(db, `SELECT run_id FROM attempts WHERE status = 'starting'`, []))?.run_id,
      { what: 'the starting attempt' },
    );
    // The launcher was spawned before the handle commit it waits behind.
    await until(() => markedProcesses(mark).length >= 2, { timeoutMs: 5_000, what: 'the runner and its launcher' });

    t.is(signalVerified(runner.identity, 'SIGKILL', { group: false }).kind, 'signalled');
    await runner.exited;
    // The runner's connection dies with it: its open transaction never commits.
    await db.admin.query('SELECT pg_terminate_backend($1)', [parked.processId]);
    await crash.remove();

    await until(() => markedProcesses(mark).length === 0, {
      timeoutMs: 5_000,
      what: 'no process of the killed runner left (the launcher read no order)',
    });
    await delay(300); // a job that had started would have written its marker by now
    t.false(existsSync(marker), 'the job never started');
    t.like(
      await ownerRow(db, 'SELECT status, handle FROM attempts WHERE run_id = $1', [runId]),
      { status: 'starting', handle: null },
      'the handle was never stored',
    );

    const supervise = cliProcess(t, ['supervise', '--db', db.runtimeUrl, '--grace', '300ms'], {
      PIDFENCE_RECEIPTS: receipts,
    });
    await supervise.waitForLine(/^pidfence supervise: ready$/, 20_000);
    await until(
      async () =>
        (await ownerRow<{ status: string }>(db, 'SELECT status FROM runs WHERE id = $1', [runId]))?.status === 'failed',
      { timeoutMs: 15_000, what: 'the run to end failed' },
    );
    const terminal = await ownerRow<{ payload: { cause: string } }>(
      db,
      `SELECT payload FROM attempt_events WHERE run_id = $1 AND type = 'attempt.terminal'`,
      [runId],
    );
    t.is(terminal?.payload.cause, 'never_started');
    t.is(signalVerified(supervise.identity, 'SIGTERM', { group: false }).kind, 'signalled');
    t.is((await supervise.exited).code, 0);
  },
);
