// `pidfence` verbs as real child processes for the ownership tests (issue 13): each a group leader
// whose lines can be awaited, and whose job group is reaped through the verified path at the end.
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { groupMembers, handleGroup, reapGroupAtEnd } from '../helpers/job-groups';
import { spawnJob, type Job } from '../helpers/processes';
import { until } from '../helpers/wait';

/** The CLI under test; PIDFENCE_TEST_CLI points another build at the same tests. */
export const CLI = process.env.PIDFENCE_TEST_CLI ?? path.resolve(__dirname, '..', '..', 'lib', 'cli', 'main.js');

export interface CliRun {
  readonly job: Job;
  readonly runId: string;
  /** The process group of the job (its launcher's). */
  readonly pgid: number;
}

/** `pidfence <args>` as a group-leading child with stderr joined to stdout, so its lines can be read. */
export function cliProcess(t: ExecutionContext, args: readonly string[], env: NodeJS.ProcessEnv = {}): Job {
  const assignments = Object.entries(env)
    .map(([key, value]) => `${key}=${JSON.stringify(value ?? '')}`)
    .join(' ');
  return spawnJob(t, 'sh', ['-c', `${assignments} exec "$0" "$@" 2>&1`, process.execPath, CLI, ...args]);
}

/** `pidfence run` of `job` on the store `db`; `groupOf` reads the run's job group from the store. */
export async function startRun(
  t: ExecutionContext,
  db: string,
  groupOf: (runId: string) => Promise<number>,
  job: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<CliRun> {
  const runner = cliProcess(t, ['run', '--db', db, '--grace', '300ms', '--', ...job], env);
  const started = await runner.waitForLine(/run (run-[0-9a-f-]+) started/, 15_000);
  const runId = /run (run-[0-9a-f-]+) started/.exec(started)?.[1] ?? '';
  const pgid = await groupOf(runId);
  reapGroupAtEnd(t, pgid);
  return { job: runner, runId, pgid };
}

/** The job group of a run on the SQLite store `file`, read from its attempt's durable handle (for startRun). */
export function sqliteJobGroup(file: string): (runId: string) => Promise<number> {
  return async (runId) => {
    const { openSqliteStore } = await import('../../lib/store/sqlite/index');
    const store = openSqliteStore(file);
    try {
      return handleGroup((await store.runStore.getAttempt(runId, `${runId}-a1`))?.handle ?? '');
    } finally {
      store.close();
    }
  };
}

/** `pidfence cancel` as its own process; the caller holds run.stop (grantCancelOn…). */
export function cancel(
  t: ExecutionContext,
  file: string,
  runId: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; lines: string[] }> {
  const job = cliProcess(t, ['cancel', '--db', file, runId], env);
  return job.exited.then((exit) => ({ code: exit.code, lines: job.lines }));
}

/**
 * `pidfence cancel` needs run.stop on the run's project (docs/decisions/0043): grants the OS user
 * (the SQLite principal) run.read and run.stop on `project` in the store file, idempotently.
 */
export async function grantCancelOnSqlite(file: string, project = 'default'): Promise<void> {
  const { openSqliteStore } = await import('../../lib/store/sqlite/index');
  const { osPrincipal } = await import('../../lib/cli/os-user');
  const store = openSqliteStore(file);
  try {
    for (const permission of ['run.read', 'run.stop'] as const)
      await store.managementStore.writeGrant({ subject: osPrincipal(), projectId: project, permission }, 'test');
  } finally {
    store.close();
  }
}

/** The same on PostgreSQL: written through the owner, for the runtime role (its session_user). */
export async function grantCancelOnPostgres(ownerUrl: string, runtimeRole: string, project = 'default'): Promise<void> {
  const { openPostgresGrantAdministration } = await import('../../lib/store/postgres/index');
  const administration = openPostgresGrantAdministration(ownerUrl);
  try {
    for (const permission of ['run.read', 'run.stop'] as const)
      await administration.writeGrant({ subject: runtimeRole, projectId: project, permission }, 'test');
  } finally {
    await administration.close();
  }
}

/** The status of a run on a SQLite store. */
export async function runStatus(file: string, runId: string): Promise<string | undefined> {
  const { openSqliteStore } = await import('../../lib/store/sqlite/index');
  const store = openSqliteStore(file);
  try {
    return (await store.runStore.getRun(runId))?.status;
  } finally {
    store.close();
  }
}

/** A `pidfence run` of `sleep 30` whose runner was SIGKILLed: its job lives on, orphaned (docs/decisions/0070). */
export async function orphanedRun(
  t: ExecutionContext,
  file: string,
  job: readonly string[] = ['sleep', '3600'],
): Promise<CliRun> {
  const run = await startRun(t, file, sqliteJobGroup(file), job);
  await until(() => groupMembers(run.pgid).length === 2, { timeoutMs: 10_000, what: 'launcher and job' });
  const killed = signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind;
  if (killed !== 'signalled') throw new Error(`the runner could not be killed: ${killed}`);
  await run.job.exited;
  return run;
}
