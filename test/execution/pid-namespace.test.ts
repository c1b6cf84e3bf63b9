// PID namespaces (issue 27 item 6, docs/decisions/0155): a PID means one process only in the
// namespace it was read in. A runner in its own PID namespace and a `cancel` from the host on the
// same store: the host never proves that runner or its job gone, and the runner inside stops it.
// A handle of another namespace is refused by the controller (unsupported) and stays unproven.
import { mkdirSync } from 'node:fs';

import test, { type ExecutionContext } from 'ava';

import {
  HeldGroups,
  LocalProcessController,
  formatHandle,
  groupLiveness,
  handleFromIdentity,
  ownPidNamespace,
} from '../../lib/process/index';
import { signalVerified } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { spawnJob, type Job } from '../helpers/processes';
import { delay } from '../helpers/wait';
import { CLI, cancel, runStatus } from './cli-runs';
import { worldDirectory } from './world';

const canUnshare = process.getuid?.() === 0;

/**
 * `pidfence run` inside `unshare --pid --fork --mount-proc`; with `hideWake` its wake directory is a
 * tmpfs of its own mount namespace, as in a container that does not share the store's directory,
 * so a host cancel cannot reach it and must fall back to proving its owner.
 */
async function runInOwnPidNamespace(
  t: ExecutionContext,
  file: string,
  hideWake: boolean,
): Promise<{ runner: Job; runId: string }> {
  const wake = `${file}.wake`;
  if (hideWake) mkdirSync(wake, { mode: 0o700 });
  const script = hideWake ? `mount -t tmpfs -o mode=0700 tmpfs "$WAKE" && exec "$0" "$@" 2>&1` : 'exec "$0" "$@" 2>&1';
  const runner = spawnJob(t, 'env', [
    `WAKE=${wake}`,
    'unshare',
    '--pid',
    '--fork',
    '--mount-proc',
    'sh',
    '-c',
    script,
    process.execPath,
    CLI,
    'run',
    '--db',
    file,
    '--grace',
    '300ms',
    '--',
    'sleep',
    '40',
  ]);
  const started = await runner.waitForLine(/run (run-[0-9a-f-]+) started/, 15_000);
  return { runner, runId: /run (run-[0-9a-f-]+) started/.exec(started)?.[1] ?? '' };
}

for (const hideWake of [false, true]) {
  const how = hideWake
    ? 'its wake-up channel out of reach: cancel says where the stop belongs'
    : 'the wake-up reaches it';
  test.serial(
    `a runner in its own PID namespace, ${how}; the host proves nothing gone and the runner inside stops its job`,
    async (t) => {
      if (!canUnshare) {
        t.log('SKIPPED LOUDLY: unshare --pid needs root here');
        t.pass();
        return;
      }
      const at = worldDirectory(t);
      const { runner, runId } = await runInOwnPidNamespace(t, at.file, hideWake);
      const cancelled = await cancel(t, at.file, runId);
      t.is(cancelled.code, 0);
      t.false(
        cancelled.lines.some((line) => line.includes('stopped the job itself')),
        cancelled.lines.join('\n'),
      );
      const expected = hideWake ? 'another PID namespace' : 'its runner stops the job';
      t.true(
        cancelled.lines.some((line) => line.includes(expected)),
        cancelled.lines.join('\n'),
      );
      const exit = await Promise.race([runner.exited, delay(20_000).then(() => ({ code: -1 }))]);
      t.is(exit.code, 143, 'the runner inside the namespace stopped its job (TERM)');
      t.is(await runStatus(at.file, runId), 'cancelled');
      const store = openSqliteStore(at.file);
      t.teardown(() => store.close());
      const events = await store.executionStore.listAttemptEvents(runId, `${runId}-a1`);
      t.false(
        events.some((event) => event.type === 'attempt.adopted'),
        'nobody on the host took the attempt over',
      );
    },
  );
}

test.serial(
  'a handle of another PID namespace: the controller answers unsupported and sends nothing; liveness stays unproven',
  async (t) => {
    const job = spawnJob(t, 'sleep', ['30']);
    const own = ownPidNamespace();
    t.not(own, null);
    const foreign = formatHandle(handleFromIdentity(job.identity, { pidNs: String(BigInt(own ?? '1') + 1n) }));
    const controller = new LocalProcessController();
    const result = await controller.requestTermination({ attemptPid: job.identity.pid, handle: foreign, graceMs: 100 });
    t.is(result.result, 'unsupported');
    t.is(groupLiveness(foreign, new HeldGroups()), 'unproven');
    t.is(new HeldGroups().hold(foreign), 'unavailable');
    await delay(200);
    t.is(signalVerified(job.identity, 0, { group: false }).kind, 'signalled', 'the job was not touched');
  },
);
