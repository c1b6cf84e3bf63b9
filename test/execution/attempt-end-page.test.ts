// Ends found together are committed together (docs/decisions/0431): the control cycle converges each
// attempt it looks at, then commits every end it found in one synced transaction per page, instead of
// one each. Real jobs, the real launcher and receipts, the real SQLite store (wrapped only to count).
// A page the store refuses is committed again one end at a time, so one bad end holds back no other.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import type { ExecutionStore } from '../../lib/store/execution-store';
import { until } from '../helpers/wait';
import { openWorld, overriding, receiptExists, type World } from './world';

const JOBS = 20;

interface Commits {
  single: number;
  paged: number;
  /** Set: the next page is refused, and the single end of this run too. */
  refuse: { page: boolean; runId: string | null };
}

function countedWorld(t: ExecutionContext): { world: World; commits: Commits } {
  const commits: Commits = { single: 0, paged: 0, refuse: { page: false, runId: null } };
  const world = openWorld(t, {
    wrap: (store) => ({
      executionStore: overriding<ExecutionStore>(store.executionStore, {
        completeAttempt: async (command: Parameters<ExecutionStore['completeAttempt']>[0]) => {
          commits.single += 1;
          if (command.runId === commits.refuse.runId) throw new Error('refused end');
          return store.executionStore.completeAttempt(command);
        },
        completeAttempts: async (commands: Parameters<ExecutionStore['completeAttempts']>[0]) => {
          commits.paged += 1;
          if (commits.refuse.page) throw new Error('refused page');
          return store.executionStore.completeAttempts(commands);
        },
      }),
    }),
  });
  return { world, commits };
}

/** JOBS jobs that run until `go` exists, then exit 3 one after another; their runs' ids. */
async function jobsWaitingFor(
  t: ExecutionContext,
  world: World,
): Promise<{ runIds: string[]; attemptOf: Map<string, string>; go(): void }> {
  const go = path.join(world.dir, 'go');
  await world.app.open();
  const runIds: string[] = [];
  const attemptOf = new Map<string, string>();
  for (let i = 0; i < JOBS; i += 1) {
    const admitted = await world.app.admit({
      projectId: 'p1',
      command: 'sh',
      args: ['-c', `while [ ! -e '${go}' ]; do sleep 0.02; done; exit 3`],
    });
    if (admitted.kind !== 'admitted') throw new Error(`admission: ${admitted.kind}`);
    runIds.push(admitted.runId);
    attemptOf.set(admitted.runId, admitted.attemptId);
  }
  t.teardown(() => writeFileSync(go, ''));
  return { runIds, attemptOf, go: () => writeFileSync(go, '') };
}

/**
 * Every job wrote its receipt and its launcher's exit was noticed: a cycle passes over an attempt whose
 * launcher it still waits on (docs/decisions/0439), and the receipt is written just before that exit.
 */
async function endsNoticed(world: World, attemptOf: ReadonlyMap<string, string>): Promise<void> {
  await until(() => [...attemptOf.values()].every((attemptId) => receiptExists(world.receipts, attemptId)), {
    what: 'every job wrote its receipt',
    timeoutMs: 20_000,
  });
  await until(() => world.app.notices.size === attemptOf.size, {
    what: "every launcher's exit noticed",
    timeoutMs: 20_000,
  });
}

test('the ends of 20 jobs found in one cycle are committed in one transaction, each with its exit', async (t) => {
  const { world, commits } = countedWorld(t);
  const { runIds, attemptOf, go } = await jobsWaitingFor(t, world);
  go();
  await endsNoticed(world, attemptOf);
  await world.app.lifecycle.runCycle();
  t.is(world.completions.length, JOBS, 'every end was found in the one cycle');
  for (const { outcome } of world.completions)
    t.like(outcome, { kind: 'completed', status: 'failed', cause: 'receipt', exitCode: 3 });
  t.deepEqual({ single: commits.single, paged: commits.paged }, { single: 0, paged: 1 }, 'one commit for the 20 ends');
  for (const runId of runIds) {
    t.like(await world.store.runStore.getRun(runId), { status: 'failed' });
    t.false(receiptExists(world.receipts, attemptOf.get(runId) as string), 'each receipt deleted after the commit');
  }
});

test('a refused page is committed one end at a time: the refused end is kept for the next cycle, the others end now', async (t) => {
  const { world, commits } = countedWorld(t);
  const { runIds, attemptOf, go } = await jobsWaitingFor(t, world);
  const refused = runIds[7] as string;
  commits.refuse = { page: true, runId: refused };
  go();
  await endsNoticed(world, attemptOf);
  await t.throwsAsync(world.app.lifecycle.runCycle(), { message: 'refused end' });
  t.is(commits.paged, 1);
  t.is(commits.single, JOBS, 'each end tried alone once');
  t.deepEqual(
    world.completions.map(({ runId }) => runId).sort(),
    runIds.filter((runId) => runId !== refused).sort(),
    'every other end was committed and reported',
  );
  t.like(await world.store.runStore.getRun(refused), { status: 'running' });
  t.true(receiptExists(world.receipts, attemptOf.get(refused) as string), 'its receipt is kept');
  commits.refuse = { page: false, runId: null };
  await world.app.lifecycle.runCycle();
  t.like(await world.store.runStore.getRun(refused), { status: 'failed' });
  t.is(world.completions.length, JOBS);
});
