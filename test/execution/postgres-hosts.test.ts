// Two hosts on one PostgreSQL database (issue 13 item 1, docs/decisions/0070): two `supervise`
// processes with different host ids, each owning the job it adopted from a killed `run` of its own
// host. A cancellation is claimed only by the owning host's supervisor; a drain stops only its own
// host's jobs; nothing is ever blocked.
import test, { type ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { groupMembers, handleGroup } from '../helpers/job-groups';
import { migratedDatabaseForFile, type MigratedDatabase } from '../helpers/pg-store';
import { receiptsDirectory } from '../helpers/temp-file';
import { cancel, cliProcess, grantCancelOnPostgres, startRun, type CliRun } from './cli-runs';
import { until } from '../helpers/wait';

const ready = migratedDatabaseForFile(test, 'pghosts');

function hostEnv(t: ExecutionContext, host: string): NodeJS.ProcessEnv {
  const receipts = receiptsDirectory(t, `pidfence-${host}-`);
  return { PIDFENCE_HOST_ID: host, PIDFENCE_RECEIPTS: receipts };
}

async function ownerRow<R>(db: MigratedDatabase, text: string, values: unknown[]): Promise<R | undefined> {
  return (await db.owner.query(text, values)).rows[0] as R | undefined;
}

function groupOf(db: MigratedDatabase): (runId: string) => Promise<number> {
  return async (runId) =>
    handleGroup(
      (await ownerRow<{ handle: string }>(db, 'SELECT handle FROM attempts WHERE run_id = $1', [runId]))?.handle ?? '',
    );
}

/** A job of `host` whose `run` was killed, so that host's supervisor takes it over. */
async function orphanedJob(t: ExecutionContext, db: MigratedDatabase, env: NodeJS.ProcessEnv): Promise<CliRun> {
  const run = await startRun(t, db.runtimeUrl, groupOf(db), ['sleep', '30'], env);
  await until(() => groupMembers(run.pgid).length === 2, { timeoutMs: 10_000, what: 'launcher and job' });
  t.is(signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind, 'signalled');
  await run.job.exited;
  return run;
}

async function runStatus(db: MigratedDatabase, runId: string): Promise<string | undefined> {
  return (await ownerRow<{ status: string }>(db, 'SELECT status FROM runs WHERE id = $1', [runId]))?.status;
}

test.serial(
  'cluster of two hosts on one database: only the owning host claims a cancellation, a drain stops only its own jobs, nothing is blocked',
  async (t) => {
    const db = await ready;
    await grantCancelOnPostgres(db.ownerUrl, db.runtimeRole);
    const envA = hostEnv(t, 'host-a');
    const envB = hostEnv(t, 'host-b');
    const jobA = await orphanedJob(t, db, envA);
    const jobB = await orphanedJob(t, db, envB);
    const jobB2 = await orphanedJob(t, db, envB);
    const supervisorA = cliProcess(t, ['supervise', '--db', db.runtimeUrl, '--grace', '300ms'], envA);
    const supervisorB = cliProcess(t, ['supervise', '--db', db.runtimeUrl, '--grace', '300ms'], envB);
    await supervisorA.waitForLine(/^pidfence supervise: ready$/, 15_000);
    await supervisorB.waitForLine(/^pidfence supervise: ready$/, 15_000);
    const adopted = (
      await db.owner.query<{ run_id: string; payload: { runner: string } }>(
        "SELECT run_id, payload FROM attempt_events WHERE type = 'attempt.adopted' ORDER BY run_id",
      )
    ).rows;
    t.deepEqual(
      adopted.map((row) => row.payload.runner),
      ['exited', 'exited', 'exited'],
      'each host took over its own jobs at start',
    );

    // Cancel host B's job: B's supervisor claims and stops it; A's never touches it.
    const cancelled = await cancel(t, db.runtimeUrl, jobB.runId, envA);
    t.deepEqual(cancelled.lines, [`cancel requested for ${jobB.runId}; its runner on another host stops the job`]);
    // Answered from the owner read at the request (docs/decisions/0386): no runner of its own, so
    // no later read that B's own stop may have settled first.
    const cancelRunners = await ownerRow<{ n: string }>(
      db,
      "SELECT COUNT(*) AS n FROM runners WHERE kind = 'cancel'",
      [],
    );
    t.is(Number(cancelRunners?.n), 0, "a cancel of another host's job registers no runner");
    await supervisorB.waitForLine(
      new RegExp(`^pidfence supervise: stopped ${jobB.runId} \\(termination_requested\\)$`),
      15_000,
    );
    await until(async () => (await runStatus(db, jobB.runId)) === 'cancelled', {
      timeoutMs: 15_000,
      what: "B's job cancelled",
    });
    t.false(
      supervisorA.lines.some((line) => line.includes(jobB.runId)),
      'A claimed nothing of B',
    );
    t.is(groupMembers(jobB.pgid).length, 0);

    // SIGTERM A: only A's job gets `shutdown`.
    t.is(signalVerified(supervisorA.identity, 'SIGTERM', { group: false }).kind, 'signalled');
    t.is((await supervisorA.exited).code, 0);
    t.true(
      supervisorA.lines.includes('pidfence supervise: drained (1 converged, 0 remaining)'),
      supervisorA.lines.join('\n'),
    );
    t.like(await ownerRow(db, 'SELECT status, cancel_reason FROM runs WHERE id = $1', [jobA.runId]), {
      status: 'cancelled',
      cancel_reason: 'shutdown',
    });
    t.like(await ownerRow(db, 'SELECT status, cancel_reason FROM runs WHERE id = $1', [jobB2.runId]), {
      status: 'running',
      cancel_reason: null,
    });
    t.is(groupMembers(jobB2.pgid).length, 2, "B's job runs on");
    const blocked = await ownerRow<{ n: string }>(
      db,
      "SELECT COUNT(*) AS n FROM cancellation_dispatches WHERE status = 'blocked'",
      [],
    );
    t.is(Number(blocked?.n), 0);

    t.is(signalVerified(supervisorB.identity, 'SIGTERM', { group: false }).kind, 'signalled');
    t.is((await supervisorB.exited).code, 0);
    t.like(await ownerRow(db, 'SELECT status, cancel_reason FROM runs WHERE id = $1', [jobB2.runId]), {
      status: 'cancelled',
      cancel_reason: 'shutdown',
    });
  },
);
