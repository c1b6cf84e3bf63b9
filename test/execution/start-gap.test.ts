// The start gap on SQLite (docs/decisions/0310): a `run` SIGKILLed after its attempt was written and
// before its handle was committed left the run `running` for ever; nothing could prove it ended. Now
// the launcher starts the job only once the handle is committed, so a runner that dies before that
// commit proves that no job ran, and the next `cancel` or `supervise` of the host ends the run.
import test from 'ava';

import { runStatusOf, storeFile, storeRow } from './clock-runs';
import { cancelEndsIt, superviseEndsIt, type GapStore } from './start-gap-runs';

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
