// The start gap on SQLite (docs/decisions/0310): a `run` SIGKILLed after its attempt was written and
// before its handle was committed left the run `running` for ever; nothing could prove it ended. Now
// the launcher starts the job only once the handle is committed, so a runner that dies before that
// commit proves that no job ran, and the next `cancel` or `supervise` of the host ends the run.
import path from 'node:path';

import test from 'ava';

import { adoptGoneRunners } from '../../lib/execution/index';
import { markedProcesses } from '../helpers/marked-processes';
import { until } from '../helpers/wait';
import { runStatusOf, storeFile, storeRow } from './clock-runs';
import { cancelEndsIt, runnerKilledInStartWindow, superviseEndsIt, type GapStore } from './start-gap-runs';
import { openWorld } from './world';

function sqliteStore(file: string): GapStore {
  return {
    db: file,
    env: {},
    runStatus: (runId) => Promise.resolve(runStatusOf(file, runId)),
    endCause: (runId) => {
      const row = storeRow<{ payload: string }>(
        file,
        "SELECT payload FROM attempt_events WHERE run_id = ? AND type = 'attempt.terminal'",
        runId,
      );
      return Promise.resolve(row === undefined ? undefined : (JSON.parse(row.payload) as { cause?: string }).cause);
    },
  };
}

test('a run SIGKILLed between its attempt and its handle: cancel proves no job ran and ends it cancelled', async (t) => {
  await cancelEndsIt(t, sqliteStore(storeFile(t, 'pidfence-gap-')));
});

test('a run SIGKILLed between its attempt and its handle: a later supervise proves no job ran and ends it failed', async (t) => {
  await superviseEndsIt(t, sqliteStore(storeFile(t, 'pidfence-gap-')));
});

test('a runner already running when the other died in its start window: its periodic adoption and next cycle end the run never started', async (t) => {
  const file = storeFile(t, 'pidfence-gap-');
  const store = sqliteStore(file);
  // Registered before the death, as a long-lived supervise is: its startup recovery saw nothing.
  const world = openWorld(t, { at: { dir: path.dirname(file), file, receipts: `${file}.receipts` } });
  await world.app.open();
  const run = await runnerKilledInStartWindow(t, store);
  // What the lifecycle does every cleanup period (its `adopt`), then one control cycle.
  t.is(await adoptGoneRunners(world.store.runnerStore, world.app.runner), 1);
  await world.app.lifecycle.runCycle();
  t.is(await store.runStatus(run.runId), 'failed');
  t.is(await store.endCause(run.runId), 'never_started');
  await until(() => markedProcesses(run.mark).length === 0, { what: 'no launcher or job left' });
});
