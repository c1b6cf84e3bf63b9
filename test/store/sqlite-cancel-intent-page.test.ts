// A page of cancel intents on the SQLite store (docs/decisions/0370): each run gets exactly what the
// single requestCancellation writes (the one rule: intent, event, pending dispatch, or its refusal),
// in the commands' order, all in one transaction: a run the database refuses writes none of the page.
import test from 'ava';

import type { RequestCancellationOutcome } from '../../lib/contract/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import { driverOf } from '../../lib/store/sqlite/driver';
import { tempFile } from '../helpers/temp-file';

function openStore(t: { teardown(fn: () => void): void }): SqliteStore {
  const { file, cleanup } = tempFile('pidfence-intent-page-');
  const store = openSqliteStore(file);
  t.teardown(() => {
    store.close();
    cleanup();
  });
  return store;
}

/** Runs `<prefix>-running` (a running attempt), `-queued`, `-ended` (terminal) and `-asked` (intent already there). */
async function seed(store: SqliteStore, prefix: string): Promise<string[]> {
  const { runStore } = store;
  const ids = ['running', 'queued', 'ended', 'asked', 'missing'].map((kind) => `${prefix}-${kind}`);
  const [running, queued, ended, asked] = ids as [string, string, string, string];
  for (const runId of [running, queued, ended, asked]) await runStore.createRun({ runId, projectId: 'project-ip' });
  await runStore.createAttempt({ runId: running, attemptId: `${running}-a1` });
  await runStore.advanceAttempt({ runId: running, attemptId: `${running}-a1`, from: 'claimed', to: 'running' });
  await runStore.markTerminal({ runId: ended, status: 'failed', eventId: `${ended}-end` });
  await runStore.requestCancellation({ runId: asked, reason: 'timeout', eventId: `${asked}-first` });
  return ids;
}

/** What a run holds after a cancel, without its ids and times. */
async function shapeOf(store: SqliteStore, runId: string): Promise<unknown> {
  const run = await store.runStore.getRun(runId);
  const events = (await store.runStore.listEvents(runId)).map(({ type, seq, payload }) => ({ type, seq, payload }));
  const dispatch = await store.dispatchRepository.getRecord(runId);
  return {
    status: run?.status,
    version: run?.version,
    reason: run?.cancelReason,
    intent: run?.cancelRequestedAtMs !== null && run?.cancelRequestedAtMs !== undefined,
    events,
    dispatch: dispatch === null ? null : { status: dispatch.status, version: dispatch.version },
  };
}

function kindsOf(outcomes: readonly RequestCancellationOutcome[]): string[] {
  return outcomes.map((outcome) => outcome.kind);
}

test('a page of cancel intents writes for each run what a single cancel writes, in order, with one time for the page', async (t) => {
  const store = openStore(t);
  const paged = await seed(store, 'p');
  const single = await seed(store, 's');
  const commands = (ids: string[]) => ids.map((runId) => ({ runId, reason: 'user' as const, eventId: `${runId}-evt` }));
  const outcomes = await store.runStore.requestCancellations(commands(paged));
  const one: RequestCancellationOutcome[] = [];
  for (const command of commands(single)) one.push(await store.runStore.requestCancellation(command));
  t.deepEqual(kindsOf(outcomes), ['requested', 'requested', 'run_terminal', 'already_requested', 'run_missing']);
  t.deepEqual(kindsOf(outcomes), kindsOf(one));
  for (const [i, runId] of paged.entries())
    t.deepEqual(await shapeOf(store, runId), await shapeOf(store, single[i] as string), runId);
  const times = outcomes.flatMap((outcome) => (outcome.kind === 'requested' ? [outcome.run.cancelRequestedAtMs] : []));
  t.is(new Set(times).size, 1, 'the page read the store clock once, under its one write lock');
  const again = await store.runStore.requestCancellations(commands(paged.slice(0, 2)));
  t.deepEqual(kindsOf(again), ['already_requested', 'already_requested'], 'an existing intent is kept');
});

test('a page of cancel intents is one transaction: a run the database refuses leaves every run of the page without intent', async (t) => {
  const store = openStore(t);
  const ids = ['a', 'b', 'c'].map((name) => `page-${name}`);
  for (const runId of ids) await store.runStore.createRun({ runId, projectId: 'project-ip' });
  // A real refusal by SQLite on this connection: the event of the page's second run cannot be inserted.
  driverOf(store.database).exec(
    "CREATE TEMP TRIGGER refuse_b BEFORE INSERT ON run_events WHEN NEW.run_id = 'page-b' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
  );
  const commands = ids.map((runId) => ({ runId, reason: 'user' as const, eventId: `${runId}-evt` }));
  await t.throwsAsync(store.runStore.requestCancellations(commands), { code: 'ERR_PIDFENCE_STORE_FAILED' });
  for (const runId of ids) {
    t.is((await store.runStore.getRun(runId))?.cancelRequestedAtMs, null, `${runId}: no intent`);
    t.deepEqual(await store.runStore.listEvents(runId), [], `${runId}: no event`);
    t.is(await store.dispatchRepository.getRecord(runId), null, `${runId}: no dispatch`);
  }
});

test('a page of cancel intents is 1 to 64 commands, each run named once, each command valid', async (t) => {
  const store = openStore(t);
  const command = (runId: string) => ({ runId, reason: 'user' as const, eventId: `${runId}-evt` });
  await t.throwsAsync(store.runStore.requestCancellations([]), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
  const tooMany = Array.from({ length: 65 }, (_, i) => command(`r-${i}`));
  await t.throwsAsync(store.runStore.requestCancellations(tooMany), { code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT' });
  await t.throwsAsync(store.runStore.requestCancellations([command('r-1'), command('r-1')]), {
    code: 'ERR_PIDFENCE_INVALID_COMMAND',
  });
  await t.throwsAsync(store.runStore.requestCancellations([{ ...command('r-1'), reason: 'x' } as never]), {
    code: 'ERR_PIDFENCE_INVALID_CANCEL_REASON',
  });
  await t.throwsAsync(store.runStore.requestCancellations('r-1' as never), { code: 'ERR_PIDFENCE_INVALID_COMMAND' });
});
