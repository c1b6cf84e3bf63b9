// A contained job taken over by a process that was not given its subtree (issue 27,
// docs/decisions/0304): `run --cgroup <dir>` starts a job that leaves a `setsid` child; its runner
// and its launcher are SIGKILLed, so only the job's cgroup still holds the child. A `cancel` (or a
// `supervise`) started without --cgroup and without PIDFENCE_CGROUP must still find that cgroup, by
// the subtree its handle names, and stop everything in it; it must never call the run cancelled
// while the child lives.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { handleExpectedIdentity, parseHandle } from '../../lib/process/index';
import { testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';
import { killMarkedAtEnd, MARK_ENV, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { until, untilValue } from '../helpers/wait';
import { cancel, cliProcess, grantCancelOnSqlite, runStatus } from './cli-runs';

const cgroupTest = cgroupTestOrSkip('cgroup takeover');

interface Orphan {
  readonly file: string;
  readonly runId: string;
  readonly mark: string;
  readonly subtree: string;
}

function storeFile(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-takeover-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'pidfence.db');
}

async function attemptHandle(file: string, runId: string): Promise<string | null> {
  const { openSqliteStore } = await import('../../lib/store/sqlite/index');
  const store = openSqliteStore(file);
  try {
    return (await store.runStore.getAttempt(runId, `${runId}-a1`))?.handle ?? null;
  } finally {
    store.close();
  }
}

/** A contained job with a setsid child whose runner and launcher were both SIGKILLed. */
async function orphanedContainedRun(t: ExecutionContext): Promise<Orphan> {
  const file = storeFile(t);
  const subtree = testSubtree(t, 'takeover');
  const mark = uniqueMark('takeover');
  killMarkedAtEnd(t, mark);
  const runner = cliProcess(
    t,
    [
      'run',
      '--db',
      file,
      '--cgroup',
      subtree,
      '--grace',
      '300ms',
      '--',
      'sh',
      '-c',
      'setsid sleep 3600 & exec sleep 3600',
    ],
    { [MARK_ENV]: mark },
  );
  const started = await runner.waitForLine(/run (run-[0-9a-f-]+) started/, 15_000);
  const runId = /run (run-[0-9a-f-]+) started/.exec(started)?.[1] ?? '';
  const handle = await untilValue(async () => (await attemptHandle(file, runId)) ?? undefined, { what: 'the handle' });
  // runner, launcher, the job's sleep and its setsid child
  await until(() => markedProcesses(mark).length === 4, { timeoutMs: 10_000, what: 'the job and its child' });
  t.is(signalVerified(runner.identity, 'SIGKILL', { group: false }).kind, 'signalled');
  await runner.exited;
  const launcher = handleExpectedIdentity(parseHandle(handle));
  t.is(signalVerified(launcher, 'SIGKILL', { group: false }).kind, 'signalled');
  await until(() => markedProcesses(mark).length === 2, { timeoutMs: 10_000, what: 'only the job and its child left' });
  await grantCancelOnSqlite(file);
  return { file, runId, mark, subtree };
}

cgroupTest(
  'a cancel given no subtree takes over a contained orphan and stops what only its cgroup holds, by the subtree its handle names',
  async (t) => {
    const orphan = await orphanedContainedRun(t);
    const env = { PIDFENCE_CGROUP: '' };
    const outcome = await cancel(t, orphan.file, orphan.runId, env);
    t.deepEqual(outcome.lines, [
      `cancel requested for ${orphan.runId}; its runner was gone, so this command stopped the job itself (cancelled)`,
    ]);
    t.deepEqual(markedProcesses(orphan.mark), [], 'the setsid child did not outlive a run called cancelled');
    t.is(await runStatus(orphan.file, orphan.runId), 'cancelled');
    t.false(existsSync(path.join(orphan.subtree, `${orphan.runId}-a1`)), "the job's cgroup was removed");
  },
);
