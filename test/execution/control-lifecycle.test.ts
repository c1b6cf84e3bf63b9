// The execution control lifecycle on the one loop (issue 31 item 3, docs/decisions/0210): its cycles
// never overlap, whether the timer or a caller (drain, adoption, a cancel taking a run over)
// starts them, and a wake-up that comes while a caller's cycle runs is not left to the cadence.
import test, { type ExecutionContext } from 'ava';

import { PROFILES } from '../../lib/dispatch/index';
import { CompletionNotices, CompletionProcessor, ControlLifecycle, DeadlineSource } from '../../lib/execution/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { delay, until } from '../helpers/wait';
import { worldDirectory } from './world';

/** A control lifecycle over a real SQLite store whose dispatch step the test holds and counts. */
function heldLifecycle(t: ExecutionContext, profile: 'edge' | 'standalone') {
  const at = worldDirectory(t);
  const store = openSqliteStore(at.file);
  t.teardown(() => store.close());
  const state = { running: 0, maxRunning: 0, started: 0, holdMs: 0 };
  const dispatch = {
    async runCycle() {
      state.started += 1;
      state.running += 1;
      state.maxRunning = Math.max(state.maxRunning, state.running);
      await delay(state.holdMs);
      state.running -= 1;
      return { dispatched: 0 };
    },
  };
  const lifecycle = new ControlLifecycle({
    profile: PROFILES[profile],
    executionStore: store.executionStore,
    receiptDirectory: at.receipts,
    dispatch,
    notices: new CompletionNotices(),
    processor: new CompletionProcessor({
      runStore: store.runStore,
      executionStore: store.executionStore,
      receiptDirectory: at.receipts,
    }),
    deadlines: new DeadlineSource({
      executionStore: store.executionStore,
      runStore: store.runStore,
      pageSize: PROFILES[profile].pageSize,
    }),
  });
  t.teardown(async () => {
    await lifecycle.stop();
  });
  return { lifecycle, state };
}

test.serial(
  "a timed cycle never starts beside runCycle(): a caller's cycle longer than the cadence is not overlapped",
  async (t) => {
    const { lifecycle, state } = heldLifecycle(t, 'standalone');
    lifecycle.start();
    await until(() => state.started === 1 && state.running === 0, { what: 'the first timed cycle' });
    state.holdMs = PROFILES.standalone.periodMs + 500;
    await lifecycle.runCycle();
    state.holdMs = 0;
    await until(() => state.started >= 3, { timeoutMs: 5_000, what: 'the timed cycles after it' });
    t.is(state.maxRunning, 1, 'one cycle at a time');
  },
);

test.serial('a wake-up while runCycle() runs is taken right after it, not a cadence later', async (t) => {
  const { lifecycle, state } = heldLifecycle(t, 'edge');
  lifecycle.start();
  await until(() => state.started === 1 && state.running === 0, { what: 'the first timed cycle' });
  state.holdMs = 200;
  const caller = lifecycle.runCycle();
  await delay(50);
  lifecycle.wake();
  await caller;
  state.holdMs = 0;
  const waited = await until(() => state.started === 3, {
    timeoutMs: PROFILES.edge.periodMs - 1_000,
    what: 'the woken cycle before the 5 s cadence',
  });
  t.true(waited < PROFILES.edge.periodMs);
  t.is(state.maxRunning, 1);
});
