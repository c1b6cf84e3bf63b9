// Real `pidfence` runs whose wall clock a test steps (docs/decisions/0190): the store read without
// opening it through pidfence (a raw read-only connection, so no migration of this build touches a
// store another build writes: PIDFENCE_TEST_CLI may point at an older one), grants given through
// the CLI under test, and a run's start and end as seen on its stderr.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';
import type { ExecutionContext } from 'ava';

import { osPrincipal } from '../../lib/cli/os-user';
import { handleGroup, reapGroupAtEnd } from '../helpers/job-groups';
import type { Job } from '../helpers/processes';
import { untilValue } from '../helpers/wait';
import { CLI, cliProcess } from './cli-runs';

/** A store path in its own temporary directory (removed at the end with everything beside it). */
export function storeFile(t: ExecutionContext, prefix = 'pidfence-clock-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'pidfence.db');
}

/** One row of `sql` from the store, read-only; undefined while the table or row is not there yet. */
export function storeRow<R>(file: string, sql: string, ...args: unknown[]): R | undefined {
  const database = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return database.prepare<unknown[], R>(sql).get(...args);
  } catch {
    return undefined;
  } finally {
    database.close();
  }
}

export function runStatusOf(file: string, runId: string): string | undefined {
  return storeRow<{ status: string }>(file, 'SELECT status FROM runs WHERE id = ?', runId)?.status;
}

/** Receipts moved to quarantine beside the store (none, when nothing was judged impossible). */
export function quarantined(file: string): string[] {
  const dir = `${file}.receipts/quarantine`;
  return existsSync(dir) ? readdirSync(dir) : [];
}

export interface StartedRun {
  readonly job: Job;
  readonly runId: string;
  /** performance.now() when `run` said it started the job. */
  readonly startedAt: number;
}

/** `pidfence run <args>` with `env`, up to its "started" line; the job's group is reaped at the end. */
export async function startedRun(
  t: ExecutionContext,
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<StartedRun> {
  const job = cliProcess(t, ['run', '--db', file, ...args], env);
  const line = await job.waitForLine(/run (run-[0-9a-f-]+) started/, 20_000);
  const startedAt = performance.now();
  const runId = /run (run-[0-9a-f-]+) started/.exec(line)?.[1] ?? '';
  const handle = await untilValue(
    () =>
      storeRow<{ handle: string | null }>(file, 'SELECT handle FROM attempts WHERE run_id = ?', runId)?.handle ??
      undefined,
    { what: "the attempt's handle" },
  );
  reapGroupAtEnd(t, handleGroup(handle));
  return { job, runId, startedAt };
}

/** The end line `run` printed (`<status>` or "did not converge"), and its exit code. */
export async function runEnd(
  run: StartedRun,
): Promise<{ code: number | null; status: string | null; afterMs: number }> {
  const exit = await run.job.exited;
  const afterMs = performance.now() - run.startedAt;
  const line = run.job.lines.find((text) => text.includes(`run ${run.runId} `) && !text.includes(' started'));
  const status = line === undefined ? null : (/run run-[0-9a-f-]+ (\w+)/.exec(line)?.[1] ?? null);
  return { code: exit.code, status, afterMs };
}

/** runEnd, or null when the run has not ended within `ms` (a test of a defect must fail, not hang). */
export function runEndWithin(run: StartedRun, ms: number): Promise<Awaited<ReturnType<typeof runEnd>> | null> {
  return Promise.race([
    runEnd(run),
    new Promise<null>((resolve) => {
      setTimeout(() => resolve(null), ms);
    }),
  ]);
}

/** A CLI command to its end: exit code and lines (stderr joined). */
export async function cliDone(
  t: ExecutionContext,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; lines: string[] }> {
  const job = cliProcess(t, args, env);
  const exit = await job.exited;
  return { code: exit.code, lines: job.lines };
}

/**
 * run.read and run.stop on `default` for this OS user, through the CLI under test. Newer builds
 * need none (the file's owner holds every grant, docs/decisions/0170) and may refuse some steps.
 */
export async function grantCancelThroughCli(t: ExecutionContext, file: string): Promise<void> {
  const subject = osPrincipal();
  await cliDone(t, ['grant', '--bootstrap', '--db', file, subject, 'default', 'grants.write']);
  for (const permission of ['run.read', 'run.stop'])
    await cliDone(t, ['grant', '--db', file, subject, 'default', permission]);
}

export { CLI };
