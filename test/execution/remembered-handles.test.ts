// A long-lived runner keeps a handle only for the jobs it may still have to escalate (issue 29): each
// admitted attempt's handle is forgotten at its end, whether the job finished or was stopped. Real
// jobs through the real execution application over a real SQLite file.
import test from 'ava';

import { openWorld } from './world';

const JOBS = 20;

test('the handles of admitted jobs are forgotten once they finished: none is kept after N jobs', async (t) => {
  const world = openWorld(t);
  world.app.start();
  const runIds: string[] = [];
  for (let i = 0; i < JOBS; i += 1) {
    const admitted = await world.app.admit({ projectId: 'p1', command: 'sh', args: ['-c', `exit ${i % 2}`] });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    runIds.push(admitted.runId);
  }
  t.true(world.app.rememberedHandleCount() <= JOBS);
  const outcomes = await Promise.all(runIds.map((runId) => world.completed(runId)));
  t.true(outcomes.every((outcome) => outcome.kind === 'completed'));
  t.is(world.app.rememberedHandleCount(), 0, 'no handle of an ended job is kept');
});

test('the handles of stopped jobs are forgotten too, and a running job keeps its own until it ends', async (t) => {
  const world = openWorld(t);
  world.app.start();
  const runIds: string[] = [];
  for (let i = 0; i < JOBS; i += 1) {
    const admitted = await world.app.admit({ projectId: 'p1', command: 'sleep', args: ['30'] });
    if (admitted.kind !== 'admitted' || admitted.status !== 'running') throw new Error('not running');
    runIds.push(admitted.runId);
  }
  t.is(world.app.rememberedHandleCount(), JOBS, 'each running job keeps its handle for escalation');
  for (const runId of runIds)
    await world.store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${runId}` });
  world.app.lifecycle.wake();
  const outcomes = await Promise.all(runIds.map((runId) => world.completed(runId, 30_000)));
  t.true(outcomes.every((outcome) => outcome.kind === 'completed' || outcome.kind === 'terminal'));
  t.is(world.app.rememberedHandleCount(), 0, 'no handle of a stopped job is kept');
});
