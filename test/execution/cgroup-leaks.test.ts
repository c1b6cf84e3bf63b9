// No empty job cgroup is left behind (issue 27, docs/decisions/0300): real `pidfence run`s in a
// throw-away cgroup subtree end normally, by cancel, by timeout and after their launcher was
// SIGKILLed, and the subtree holds no job cgroup afterwards. A `keep` job's cgroup outlives its
// run while its leftover lives; once empty, the next runner's start-up sweep removes it, and a
// directory that is no ended attempt of the store is left alone.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { createExecution } from '../../lib/execution/index';
import { signalVerified } from '../../lib/native/index';
import { formatHandle, handleExpectedIdentity, handleFromIdentity, parseHandle } from '../../lib/process/index';
import { forgetCgroupSubtree } from '../../lib/process/job-cgroup';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { cgroupPids, makeCgroup, testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';
import { reapGroupAtEnd } from '../helpers/job-groups';
import { killMarkedAtEnd, MARK_ENV, markedProcesses, uniqueMark } from '../helpers/marked-processes';
import { spawnJob } from '../helpers/processes';
import { until } from '../helpers/wait';
import { cancel, cliProcess, grantCancelOnSqlite, sqliteJobGroup } from './cli-runs';
import { diskErrorWhile, openWorld } from './world';

const cgroupTest = cgroupTestOrSkip('cgroup leak');

const STARTED = /run (run-[0-9a-f-]+) started/;

function jobCgroups(subtree: string): string[] {
  return readdirSync(subtree, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
}

function storeFile(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-cgroup-leaks-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'store.db');
}

/** `pidfence run` of `script` in `subtree`; resolves with the runner, its run id, once started. */
async function runIn(t: ExecutionContext, db: string, subtree: string, script: string, flags: string[] = []) {
  const mark = uniqueMark('cgroup-leaks');
  killMarkedAtEnd(t, mark);
  const runner = cliProcess(t, ['run', '--db', db, '--grace', '300ms', ...flags, '--', 'sh', '-c', script], {
    PIDFENCE_CGROUP: subtree,
    [MARK_ENV]: mark,
  });
  const runId = STARTED.exec(await runner.waitForLine(STARTED, 15_000))?.[1] ?? '';
  reapGroupAtEnd(t, await sqliteJobGroup(db)(runId));
  return { runner, runId, mark };
}

function storesOf(db: string) {
  const store = openSqliteStore(db);
  return {
    store,
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
  };
}

async function attemptHandle(db: string, runId: string): Promise<string> {
  const store = openSqliteStore(db);
  try {
    return (await store.runStore.getAttempt(runId, `${runId}-a1`))?.handle ?? '';
  } finally {
    store.close();
  }
}

cgroupTest('a job that ends by itself leaves no job cgroup', async (t) => {
  const subtree = testSubtree(t, 'leak-end');
  const { runner } = await runIn(t, storeFile(t), subtree, 'exit 0');
  t.is((await runner.exited).code, 0);
  t.deepEqual(jobCgroups(subtree), []);
});

cgroupTest('a cancelled job leaves no job cgroup', async (t) => {
  const subtree = testSubtree(t, 'leak-cancel');
  const db = storeFile(t);
  const { runner, runId, mark } = await runIn(t, db, subtree, 'setsid sleep 1000 & sleep 1000');
  await until(() => markedProcesses(mark).length >= 3, { what: 'job and its setsid child' });
  await grantCancelOnSqlite(db);
  t.is((await cancel(t, db, runId, { PIDFENCE_CGROUP: subtree })).code, 0);
  await runner.exited;
  t.deepEqual(markedProcesses(mark), []);
  t.deepEqual(jobCgroups(subtree), []);
});

cgroupTest('a timed-out job leaves no job cgroup', async (t) => {
  const subtree = testSubtree(t, 'leak-timeout');
  const { runner, mark } = await runIn(t, storeFile(t), subtree, 'setsid sleep 1000 & sleep 1000', ['--timeout', '1s']);
  t.is((await runner.exited).code, 124);
  t.deepEqual(markedProcesses(mark), []);
  t.deepEqual(jobCgroups(subtree), []);
});

cgroupTest(
  'a job whose launcher was SIGKILLed leaves no job cgroup once it ends (the launcher could not remove it)',
  async (t) => {
    const subtree = testSubtree(t, 'leak-launcher');
    const db = storeFile(t);
    const gate = path.join(path.dirname(db), 'go');
    const { runner, runId, mark } = await runIn(t, db, subtree, `while [ ! -e '${gate}' ]; do sleep 0.05; done`);
    await until(() => markedProcesses(mark).length >= 1, { what: 'the job running' });
    const launcher = handleExpectedIdentity(parseHandle(await attemptHandle(db, runId)));
    t.is(signalVerified(launcher, 'SIGKILL', { group: false }).kind, 'signalled');
    writeFileSync(gate, ''); // the job now ends by itself, with nobody left to remove its cgroup but the runner
    await runner.exited;
    t.deepEqual(markedProcesses(mark), []);
    t.deepEqual(jobCgroups(subtree), []);
  },
);

/** PIDFENCE_CGROUP for this process (the in-process runner), put back when the test ends. */
function inProcessSubtree(t: ExecutionContext, subtree: string): void {
  process.env.PIDFENCE_CGROUP = subtree;
  forgetCgroupSubtree();
  t.teardown(() => {
    delete process.env.PIDFENCE_CGROUP;
    forgetCgroupSubtree();
  });
}

cgroupTest(
  'a start undone because the store could not keep its handle leaves no job cgroup (its attempt never names it)',
  async (t) => {
    const subtree = testSubtree(t, 'leak-undo');
    inProcessSubtree(t, subtree);
    const world = openWorld(t, {
      wrap: (store) => ({
        runStore: diskErrorWhile(
          store.runStore,
          'advanceAttempt',
          (command: { to: string }) => command.to === 'running',
        ),
      }),
    });
    const mark = uniqueMark('cgroup-undo');
    killMarkedAtEnd(t, mark);
    await t.throwsAsync(
      world.app.admit({
        projectId: 'p1',
        command: 'sleep',
        args: ['30'],
        env: { ...process.env, [MARK_ENV]: mark },
      }),
      { message: /disk I\/O error/ },
    );
    t.deepEqual(markedProcesses(mark), []);
    t.deepEqual(jobCgroups(subtree), []);
  },
);

/** A running attempt of the store whose handle names an empty cgroup of the subtree: never swept. */
async function activeAttemptWithEmptyCgroup(t: ExecutionContext, db: string, subtree: string): Promise<string> {
  const job = spawnJob(t, 'sleep', ['30']);
  const { store } = storesOf(db);
  try {
    await store.runStore.createRun({ runId: 'run-active', projectId: 'default' });
    await store.runStore.createAttempt({ runId: 'run-active', attemptId: 'run-active-a1' });
    const { id } = makeCgroup(subtree, 'run-active-a1');
    await store.runStore.advanceAttempt({
      runId: 'run-active',
      attemptId: 'run-active-a1',
      from: 'claimed',
      to: 'running',
      pid: job.identity.pid,
      handle: formatHandle(handleFromIdentity(job.identity, { cgroupId: id })),
    });
  } finally {
    store.close();
  }
  return 'run-active-a1';
}

cgroupTest(
  "a `keep` job's cgroup stays while its leftover lives; once empty, the next runner's start-up sweep removes it, and no other directory (not an active attempt's)",
  async (t) => {
    const subtree = testSubtree(t, 'leak-keep');
    const db = storeFile(t);
    const mark = uniqueMark('cgroup-keep');
    killMarkedAtEnd(t, mark);
    inProcessSubtree(t, subtree);
    const { store, stores } = storesOf(db);
    const first = createExecution({ stores, receiptDirectory: path.join(path.dirname(db), 'receipts') });
    const admitted = await first.admit({
      projectId: 'default',
      command: 'sh',
      args: ['-c', 'setsid sleep 1000 &'],
      env: { ...process.env, [MARK_ENV]: mark },
      leftovers: 'keep',
    });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    first.start();
    await until(async () => (await store.runStore.getRun(admitted.runId))?.status === 'succeeded', {
      what: 'the run ended with its leader',
    });
    const directory = path.join(subtree, admitted.attemptId);
    t.is(cgroupPids(directory).length, 1, 'the kept leftover lives in the job cgroup');
    await first.drain();
    t.deepEqual(jobCgroups(subtree), [admitted.attemptId], 'a populated cgroup is never removed');
    writeFileSync(path.join(directory, 'cgroup.kill'), '1');
    await until(() => markedProcesses(mark).length === 0, { what: 'the leftover gone' });
    mkdirSync(path.join(subtree, 'not-an-attempt-a1'));
    const active = await activeAttemptWithEmptyCgroup(t, db, subtree);
    const second = createExecution({
      stores: storesOf(db).stores,
      receiptDirectory: path.join(path.dirname(db), 'receipts'),
    });
    second.start();
    await until(() => !jobCgroups(subtree).includes(admitted.attemptId), { what: 'the sweep removed it' });
    await second.drain();
    t.deepEqual(
      jobCgroups(subtree).sort(),
      ['not-an-attempt-a1', active],
      "what is no ended attempt of the store stays, also an active attempt's empty cgroup",
    );
  },
);
