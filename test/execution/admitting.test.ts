// An attempt being admitted is left alone (docs/decisions/0310). The completion processor's read and
// its commit are two steps; an admission in the same process can move a `claimed` attempt on and
// start its job between them. Here both are held at exactly those points with the real SQLite store
// and a real job: the admission before its `claimed` → `starting` move, the processor before its
// commit. A cancel intent is on the run. The processor must not end a run whose job then starts.
import test from 'ava';

import type { ExecutionStore } from '../../lib/store/execution-store';
import type { RunStore } from '../../lib/store/run-store';
import { reapGroupAtEnd, handleGroup } from '../helpers/job-groups';
import { until } from '../helpers/wait';
import { handleAlive, openWorld, overriding } from './world';

/** A promise and the function that settles it. */
function gate(): { readonly opened: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

test('a claimed attempt under a cancel intent is not ended while its admission may still start its job', async (t) => {
  const admissionHeld = gate();
  const admissionReleased = gate();
  const commitHeld = gate();
  const commitReleased = gate();
  let commits = 0;
  const world = openWorld(t, {
    wrap: (store) => ({
      runStore: overriding(store.runStore, {
        advanceAttempt: async (command: Parameters<RunStore['advanceAttempt']>[0]) => {
          if (command.from === 'claimed') {
            admissionHeld.open();
            await admissionReleased.opened;
          }
          return store.runStore.advanceAttempt(command);
        },
      }),
      executionStore: overriding(store.executionStore, {
        completeAttempt: async (command: Parameters<ExecutionStore['completeAttempt']>[0]) => {
          commits += 1;
          commitHeld.open();
          await commitReleased.opened;
          return store.executionStore.completeAttempt(command);
        },
      }),
    }),
  });
  await world.app.open();
  const admitted = world.app.admit({ projectId: 'p1', runId: 'run-admitting', command: 'sleep', args: ['3600'] });
  await admissionHeld.opened;
  const ref = { runId: 'run-admitting', attemptId: 'run-admitting-a1' };
  await world.store.runStore.requestCancellation({ runId: ref.runId, reason: 'user', eventId: 'evt-admitting' });

  const processed = world.app.processor.process(ref);
  // Either the processor answered without a commit, or it is held at its commit: then the admission
  // moves on and starts the job before that commit is let through.
  await Promise.race([processed, commitHeld.opened]);
  admissionReleased.open();
  const outcome = await admitted;
  if (outcome.kind !== 'admitted') throw new Error(`admission: ${outcome.kind}`);
  commitReleased.open();
  const processedOutcome = await processed;

  const attempt = await world.store.runStore.getAttempt(ref.runId, ref.attemptId);
  if (attempt?.handle) reapGroupAtEnd(t, handleGroup(attempt.handle));
  t.is(outcome.status, 'running', 'the admission started the job');
  t.true(handleAlive(attempt?.handle ?? ''), 'the job runs');
  t.is(commits, 0, 'the processor committed nothing while the attempt was being admitted');
  t.is(processedOutcome.kind, 'active');
  t.like(await world.store.runStore.getRun(ref.runId), { status: 'running' }, 'no terminal state for a running job');

  // The intent is kept: the runner's next cycle stops the job, and only then is the run cancelled.
  world.app.start();
  t.like(await world.completed(ref.runId), { kind: 'completed', status: 'cancelled' });
  await until(() => !handleAlive(attempt?.handle ?? ''), { what: 'the job stopped' });
});
