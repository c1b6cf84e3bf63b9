// The one contract suite for every DispatchRepository + RunStore (design/dispatch §6 gates 1-7, 9, 10 at
// the repository level; design/postgres §D7-D8). Stores differ in SQL and clock only, so this runs unchanged.

import test, { type ExecutionContext } from 'ava';

import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../../lib/base/errors';
import {
  DUE_PAGE_MAX,
  LEASE_DURATION_MAX_MS,
  RETRY_DELAY_MAX_MS,
  createLeaseToken,
  leaseTokenDigest,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type DispatchResult,
  type DueCursor,
  type DueItem,
  type RecordResultCommand,
  type RequestCancellationOutcome,
} from '../../lib/contract/index';
import { uniqueId } from '../helpers/unique-id';
import type { ContractStore, ContractStoreFactory } from '../helpers/stores';
import { cancelledRun, type CancelledRun } from '../helpers/cancelled-runs';

const LONG_LEASE_MS = 60_000;

/**
 * The short lease and retry delay a test lets expire. On a real-time store a wait stays ≤ 3 s and a
 * lease outlasts a stall of a second (100 ms leases expired under load 24 before "not due" was
 * read); on a store whose clock the test moves, they are long enough that no
 * stall of a loaded machine ends a lease the test still counts as live (a 300 ms lease failed "still
 * leased" checks under load 24), and still shorter than LONG_LEASE_MS.
 */
function durationsOf(store: ContractStore): { LEASE_MS: number; RETRY_MS: number } {
  return store.timeIsVirtual === true ? { LEASE_MS: 20_000, RETRY_MS: 30_000 } : { LEASE_MS: 1_000, RETRY_MS: 1_500 };
}

/** The run's due item, walking every due page: a database shared by the file's tests may hold more than one page of older due items. */
async function dueItemOf(store: ContractStore, runId: string): Promise<DueItem | undefined> {
  let after: DueCursor | undefined;
  for (;;) {
    const page = await store.repository.duePage({ limit: DUE_PAGE_MAX, ...(after === undefined ? {} : { after }) });
    const found = page.items.find((item) => item.runId === runId);
    if (found !== undefined || page.next === null) return found;
    after = page.next;
  }
}

function cancelledRunIn(store: ContractStore, projectId = 'project-a'): Promise<CancelledRun> {
  return cancelledRun(store.runStore, { projectId });
}

/** An `external` run (pidfence does not run it) with an attempt, cancelled through the run store. */
async function cancelledExternalRunIn(
  store: ContractStore,
): Promise<{ runId: string; attemptId: string; cancelled: RequestCancellationOutcome }> {
  const runId = uniqueId('run');
  const attemptId = `${runId}-a1`;
  await store.runStore.createRun({ runId, projectId: 'p', owner: 'external' });
  await store.runStore.createAttempt({ runId, attemptId });
  const cancelled = await store.runStore.requestCancellation({ runId, reason: 'policy', eventId: uniqueId('evt') });
  return { runId, attemptId, cancelled };
}

/** A fresh runner of this store: a due page for it sees only the runs created for it. */
async function runnerIn(store: ContractStore): Promise<string> {
  const runnerId = uniqueId('rnr');
  await store.runnerStore.registerRunner({ runnerId, hostId: 'host-contract', kind: 'run', identity: '{}' });
  return runnerId;
}

function claimOf(run: CancelledRun, owner: string, leaseDurationMs = LONG_LEASE_MS): ClaimCommand {
  return { ...run, owner, token: createLeaseToken(), leaseDurationMs };
}

async function claimed(
  t: ExecutionContext,
  store: ContractStore,
  command: ClaimCommand,
): Promise<CancellationDispatchRecord> {
  const outcome = await store.repository.claim(command);
  if (outcome.kind !== 'claimed') return t.fail(`expected claimed, got ${outcome.kind}`) as never;
  return outcome.record;
}

function resultOf(
  claim: ClaimCommand,
  record: CancellationDispatchRecord,
  result: DispatchResult,
  retryDelayMs?: number,
): RecordResultCommand {
  const base = {
    runId: claim.runId,
    attemptId: claim.attemptId,
    owner: claim.owner,
    token: claim.token,
    expectedVersion: record.version,
    result,
    eventId: uniqueId('evt'),
  };
  return retryDelayMs === undefined ? base : { ...base, retryDelayMs };
}

/** Everything a store holds about one run, for "nothing changed" assertions. */
async function snapshot(store: ContractStore, runId: string): Promise<unknown> {
  return {
    run: await store.runStore.getRun(runId),
    record: await store.repository.getRecord(runId),
    events: await store.runStore.listEvents(runId),
  };
}

async function rejectsAsInput(t: ExecutionContext, promise: Promise<unknown>): Promise<void> {
  const error = await t.throwsAsync(promise);
  t.true(
    error instanceof PidfenceTypeError || error instanceof PidfenceRangeError,
    `typed input error, got ${String(error)}`,
  );
  t.regex((error as PidfenceTypeError).code, /^ERR_PIDFENCE_INVALID_/);
}

export function registerDispatchContractSuite(factory: ContractStoreFactory): void {
  const storeTest = (title: string, body: (t: ExecutionContext, store: ContractStore) => Promise<void>): void => {
    test(`${title} [${factory.name}]`, async (t) => {
      const store = await factory.open();
      try {
        await body(t, store);
      } finally {
        await store.close();
      }
    });
  };

  storeTest('gate 1: concurrent claims on one run produce exactly one lease owner', async (t, store) => {
    const run = await cancelledRunIn(store);
    const commands = Array.from({ length: 8 }, (_, i) => claimOf(run, `worker-${i}`));
    const outcomes = await Promise.all(commands.map((command) => store.repository.claim(command)));
    const winners = outcomes.flatMap((outcome, i) =>
      outcome.kind === 'claimed' ? [{ outcome, command: commands[i] }] : [],
    );
    t.is(winners.length, 1);
    t.deepEqual(
      outcomes.filter((o) => o.kind !== 'claimed').map((o) => o.kind),
      Array(7).fill('leased'),
    );
    const record = await store.repository.getRecord(run.runId);
    t.is(record?.leaseOwner, winners[0]?.command?.owner);
    t.is(record?.leaseTokenDigest, leaseTokenDigest(winners[0]?.command?.token ?? ''));
    t.is(record?.dispatchCount, 1);
  });

  storeTest(
    'gate 2: an unexpired lease is not taken over; after expiry a new owner gets a new token and version',
    async (t, store) => {
      const { LEASE_MS } = durationsOf(store);
      const run = await cancelledRunIn(store);
      // The longest wait the suite allows: the two "still leased" checks must finish before the lease
      // ends even when a loaded machine stalls this process for a while.
      const leaseMs = 3 * LEASE_MS;
      const first = claimOf(run, 'worker-a', leaseMs);
      const firstRecord = await claimed(t, store, first);
      t.is(
        firstRecord.leaseExpiresAtMs,
        firstRecord.updatedAtMs + leaseMs,
        'the repository computes the expiry from its own clock',
      );
      t.deepEqual(await store.repository.claim(claimOf(run, 'worker-b')), { kind: 'leased' });
      t.is(await dueItemOf(store, run.runId), undefined, 'a live lease is not due');

      await store.advanceTime(leaseMs + 20);
      const due = await dueItemOf(store, run.runId);
      t.like(due, { source: 'lease_expired', attemptId: run.attemptId, cancelRequestedAtMs: run.cancelRequestedAtMs });

      const second = claimOf(run, 'worker-b');
      const secondRecord = await claimed(t, store, second);
      t.is(secondRecord.version, firstRecord.version + 1);
      t.is(secondRecord.dispatchCount, 2);
      t.is(secondRecord.leaseOwner, 'worker-b');
      t.not(secondRecord.leaseTokenDigest, firstRecord.leaseTokenDigest);
      t.deepEqual(await store.repository.recordResult(resultOf(first, firstRecord, 'termination_requested')), {
        kind: 'stale_fence',
      });
      t.is((await store.repository.recordResult(resultOf(second, secondRecord, 'already_exited'))).kind, 'recorded');
    },
  );

  const staleFences: ReadonlyArray<[string, (command: RecordResultCommand) => RecordResultCommand]> = [
    ['a stale owner', (c) => ({ ...c, owner: 'worker-stale' })],
    ['a stale token', (c) => ({ ...c, token: createLeaseToken() })],
    ['a stale version', (c) => ({ ...c, expectedVersion: c.expectedVersion + 1 })],
    ['another attempt id', (c) => ({ ...c, attemptId: `${c.attemptId}-other` })],
  ];
  for (const [what, corrupt] of staleFences) {
    storeTest(`gate 3: ${what} cannot record a result`, async (t, store) => {
      const run = await cancelledRunIn(store);
      const claim = claimOf(run, 'worker-a');
      const record = await claimed(t, store, claim);
      const before = await snapshot(store, run.runId);
      t.deepEqual(await store.repository.recordResult(corrupt(resultOf(claim, record, 'termination_requested'))), {
        kind: 'stale_fence',
      });
      t.deepEqual(await snapshot(store, run.runId), before, 'a rejected fence writes nothing');
      t.is(
        (await store.repository.recordResult(resultOf(claim, record, 'termination_requested'))).kind,
        'recorded',
        'the real fence still works',
      );
    });
  }

  storeTest('gate 3: a settled lease cannot be settled twice with the same fence', async (t, store) => {
    const run = await cancelledRunIn(store);
    const claim = claimOf(run, 'worker-a');
    const record = await claimed(t, store, claim);
    t.is((await store.repository.recordResult(resultOf(claim, record, 'already_exited'))).kind, 'recorded');
    t.deepEqual(await store.repository.recordResult(resultOf(claim, record, 'identity_mismatch')), {
      kind: 'stale_fence',
    });
    t.is((await store.repository.getRecord(run.runId))?.status, 'dispatched');
  });

  storeTest('gate 4: a failing event append rolls back both the run version and the dispatch', async (t, store) => {
    const run = await cancelledRunIn(store);
    const claim = claimOf(run, 'worker-a');
    const record = await claimed(t, store, claim);
    const before = await snapshot(store, run.runId);
    const command = resultOf(claim, record, 'termination_requested');
    const restore = await store.injectEventAppendFailure();
    const error = await t.throwsAsync(store.repository.recordResult(command));
    t.true(error instanceof PidfenceError);
    t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_FAILED');
    t.false(error?.message.includes(claim.token) ?? true);
    t.deepEqual(await snapshot(store, run.runId), before, 'run version, event sequence and dispatch are unchanged');
    await restore();
    const recorded = await store.repository.recordResult(command);
    if (recorded.kind !== 'recorded') return t.fail('the untouched fence must still settle');
    t.is(recorded.event.seq, (before as { run: { nextEventSeq: number } }).run.nextEventSeq);
    t.is((await store.runStore.getRun(run.runId))?.version, (before as { run: { version: number } }).run.version + 1);
  });

  storeTest(
    'gate 5: retry_wait is not due before its time and is due after, with dispatch_count incremented',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      const run = await cancelledRunIn(store);
      const claim = claimOf(run, 'worker-a');
      const record = await claimed(t, store, claim);
      const settled = await store.repository.recordResult(resultOf(claim, record, 'dispatch_error', RETRY_MS));
      if (settled.kind !== 'recorded') return t.fail('settle failed');
      t.is(settled.record.nextAttemptAtMs, settled.record.updatedAtMs + RETRY_MS);
      t.deepEqual(await store.repository.claim(claimOf(run, 'worker-b')), { kind: 'not_due' });
      t.is(await dueItemOf(store, run.runId), undefined);

      await store.advanceTime(RETRY_MS + 20);
      const due = await dueItemOf(store, run.runId);
      t.like(due, { source: 'retry_due', atMs: settled.record.nextAttemptAtMs ?? -1, attemptId: run.attemptId });
      const again = await claimed(t, store, claimOf(run, 'worker-b'));
      t.is(again.dispatchCount, 2);
      t.is(again.version, settled.record.version + 1);
      t.is(again.nextAttemptAtMs, null);
    },
  );

  storeTest('gate 6: dispatched and blocked records are never claimed again', async (t, store) => {
    const { LEASE_MS } = durationsOf(store);
    const finals: ReadonlyArray<[DispatchResult, 'dispatched' | 'blocked']> = [
      ['termination_requested', 'dispatched'],
      ['already_exited', 'dispatched'],
      ['identity_mismatch', 'blocked'],
      ['pid_mismatch', 'blocked'],
      ['unsupported', 'blocked'],
      ['invalid', 'blocked'],
    ];
    const runs: Array<[CancelledRun, 'dispatched' | 'blocked']> = [];
    for (const [result, status] of finals) {
      const run = await cancelledRunIn(store);
      const claim = claimOf(run, 'worker-a', LEASE_MS);
      const outcome = await store.repository.recordResult(resultOf(claim, await claimed(t, store, claim), result));
      if (outcome.kind !== 'recorded') return t.fail('settle failed');
      t.is(outcome.record.status, status);
      t.is(outcome.record.blockedAtMs, status === 'blocked' ? outcome.record.updatedAtMs : null);
      runs.push([run, status]);
    }
    await store.advanceTime(LEASE_MS + 20);
    const due = new Set((await store.repository.duePage({ limit: DUE_PAGE_MAX })).items.map((item) => item.runId));
    for (const [run, status] of runs) {
      t.deepEqual(await store.repository.claim(claimOf(run, 'worker-b')), { kind: status });
      t.false(due.has(run.runId), `${status} is never due`);
    }
  });

  storeTest(
    'gate 7: controller_missing, handle_missing and dispatch_error back off with a persisted due time',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      for (const result of ['controller_missing', 'handle_missing', 'dispatch_error'] as const) {
        const run = await cancelledRunIn(store);
        const claim = claimOf(run, 'worker-a');
        const outcome = await store.repository.recordResult(
          resultOf(claim, await claimed(t, store, claim), result, RETRY_MS),
        );
        if (outcome.kind !== 'recorded') return t.fail('settle failed');
        t.is(outcome.event.type, 'run.cancel_dispatch_failed');
        const stored = await store.repository.getRecord(run.runId);
        t.like(stored, {
          status: 'retry_wait',
          lastResult: result,
          leaseOwner: null,
          leaseTokenDigest: null,
          leaseExpiresAtMs: null,
        });
        t.is(
          stored?.nextAttemptAtMs,
          (stored?.updatedAtMs ?? 0) + RETRY_MS,
          'the repository made the delay absolute with its own clock',
        );
      }
    },
  );

  storeTest(
    'gate 9: the due page holds at most its limit, in a stable keyset order covering each due run once',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      const runs: CancelledRun[] = [];
      for (let i = 0; i < 40; i += 1) runs.push(await cancelledRunIn(store, i % 2 === 0 ? 'project-a' : 'project-b'));
      // Two of them become retry_due items, so the page merges both branches.
      for (const run of runs.slice(0, 2)) {
        const claim = claimOf(run, 'worker-a');
        await store.repository.recordResult(
          resultOf(claim, await claimed(t, store, claim), 'handle_missing', RETRY_MS),
        );
      }
      await store.advanceTime(RETRY_MS + 20);
      const seen: string[] = [];
      let after: { atMs: number; runId: string } | undefined;
      let previous: [number, string] = [-1, ''];
      for (let page = 0; page < 10; page += 1) {
        const result = await store.repository.duePage(after === undefined ? { limit: 16 } : { limit: 16, after });
        t.true(result.items.length <= 16);
        for (const item of result.items) {
          t.true(
            item.atMs > previous[0] || (item.atMs === previous[0] && item.runId > previous[1]),
            'strictly increasing keyset',
          );
          previous = [item.atMs, item.runId];
          seen.push(item.runId);
        }
        if (result.next === null) break;
        after = result.next;
      }
      const ours = seen.filter((id) => runs.some((run) => run.runId === id));
      t.is(ours.length, 40, 'every due run appears');
      t.is(new Set(ours).size, 40, 'no run appears twice');
      await rejectsAsInput(t, store.repository.duePage({ limit: DUE_PAGE_MAX + 1 }));
    },
  );

  storeTest('gate 9: a lease or retry delay beyond its hard limit is refused and changes nothing', async (t, store) => {
    const run = await cancelledRunIn(store);
    const pending = await snapshot(store, run.runId);
    await rejectsAsInput(t, store.repository.claim(claimOf(run, 'worker-a', LEASE_DURATION_MAX_MS + 1)));
    t.deepEqual(await snapshot(store, run.runId), pending);
    const claim = claimOf(run, 'worker-a');
    const record = await claimed(t, store, claim);
    const before = await snapshot(store, run.runId);
    await rejectsAsInput(
      t,
      store.repository.recordResult(resultOf(claim, record, 'dispatch_error', RETRY_DELAY_MAX_MS + 1)),
    );
    t.deepEqual(await snapshot(store, run.runId), before);
  });

  storeTest(
    'gate 10: events carry only attempt id, dispatch count and result, never owner, token or digest',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      const run = await cancelledRunIn(store);
      const secrets: string[] = [];
      const first = claimOf(run, 'owner-secret-1');
      const firstRecord = await claimed(t, store, first);
      secrets.push(first.owner, first.token, firstRecord.leaseTokenDigest ?? '');
      await store.repository.recordResult(resultOf(first, firstRecord, 'dispatch_error', RETRY_MS));
      await store.advanceTime(RETRY_MS + 20);
      const second = claimOf(run, 'owner-secret-2');
      const secondRecord = await claimed(t, store, second);
      secrets.push(second.owner, second.token, secondRecord.leaseTokenDigest ?? '');
      await store.repository.recordResult(resultOf(second, secondRecord, 'identity_mismatch'));

      const events = await store.runStore.listEvents(run.runId);
      t.deepEqual(
        events.map((event) => event.type),
        ['run.cancel_requested', 'run.cancel_dispatch_failed', 'run.cancel_dispatch_blocked'],
      );
      t.deepEqual(events[1]?.payload, { attemptId: run.attemptId, dispatchCount: 1, result: 'dispatch_error' });
      t.deepEqual(events[2]?.payload, { attemptId: run.attemptId, dispatchCount: 2, result: 'identity_mismatch' });
      const text = JSON.stringify(events);
      for (const secret of [...secrets, '4242', '"v":1'])
        t.false(text.includes(secret), 'no owner, token, digest, pid or handle in events');
    },
  );

  storeTest('a record bound to another attempt fails closed and is never rebound', async (t, store) => {
    const { RETRY_MS } = durationsOf(store);
    const run = await cancelledRunIn(store);
    const claim = claimOf(run, 'worker-a');
    await store.repository.recordResult(
      resultOf(claim, await claimed(t, store, claim), 'controller_missing', RETRY_MS),
    );
    t.is(
      (await store.runStore.endAttempt({ runId: run.runId, attemptId: run.attemptId, status: 'failed' })).kind,
      'ended',
    );
    const next = { ...run, attemptId: `${run.runId}-a2` };
    t.is((await store.runStore.createAttempt({ runId: run.runId, attemptId: next.attemptId })).kind, 'created');
    await store.advanceTime(RETRY_MS + 20);
    const before = await store.repository.getRecord(run.runId);
    t.deepEqual(await store.repository.claim(claimOf(next, 'worker-b')), { kind: 'attempt_conflict' });
    t.deepEqual(await store.repository.claim(claimOf(run, 'worker-b')), {
      kind: 'not_eligible',
      reason: 'attempt_inactive',
    });
    t.deepEqual(await store.repository.getRecord(run.runId), before);
  });

  storeTest(
    'claim refuses runs that are not eligible (design/dispatch §2.2 steps 1-2) and writes nothing',
    async (t, store) => {
      const run = await cancelledRunIn(store);
      // The record as it was before the refusal: null, or the pending one the cancel wrote (docs/decisions/0022).
      const expect = async (command: ClaimCommand, reason: string) => {
        const before = await store.repository.getRecord(command.runId);
        t.true(before === null || (before.status === 'pending' && before.dispatchCount === 0));
        t.deepEqual(await store.repository.claim(command), { kind: 'not_eligible', reason });
        t.deepEqual(await store.repository.getRecord(command.runId), before);
      };
      await expect({ ...claimOf(run, 'w'), runId: 'run-missing' }, 'run_missing');
      await expect({ ...claimOf(run, 'w'), cancelRequestedAtMs: run.cancelRequestedAtMs + 1 }, 'cancel_mismatch');
      await expect({ ...claimOf(run, 'w'), attemptId: 'attempt-missing' }, 'attempt_missing');

      const quiet = uniqueId('run');
      await store.runStore.createRun({ runId: quiet, projectId: 'p' });
      await store.runStore.createAttempt({ runId: quiet, attemptId: `${quiet}-a1` });
      await expect(
        claimOf({ runId: quiet, attemptId: `${quiet}-a1`, cancelRequestedAtMs: 0 }, 'w'),
        'cancel_not_requested',
      );

      const external = await cancelledExternalRunIn(store);
      const at = external.cancelled.kind === 'requested' ? (external.cancelled.run.cancelRequestedAtMs ?? 0) : 0;
      await expect(
        claimOf({ runId: external.runId, attemptId: external.attemptId, cancelRequestedAtMs: at }, 'w'),
        'run_not_runtime',
      );

      t.is(
        (
          await store.runStore.markTerminal({
            runId: run.runId,
            status: 'cancelled',
            eventId: uniqueId('evt'),
            attemptId: run.attemptId,
          })
        ).kind,
        'terminal',
      );
      await expect(claimOf(run, 'w'), 'run_terminal');
    },
  );

  storeTest(
    'the cancel request writes the pending dispatch of the active attempt, due at the cancel time; an attempt created after the cancel gets it then, and the cancel leaves its run queued (docs/decisions/0022, 0340)',
    async (t, store) => {
      const { LEASE_MS } = durationsOf(store);
      const run = await cancelledRunIn(store);
      t.like(await store.repository.getRecord(run.runId), {
        status: 'pending',
        attemptId: run.attemptId,
        version: 0,
        dispatchCount: 0,
        nextAttemptAtMs: run.cancelRequestedAtMs,
        leaseOwner: null,
      });
      const due = await dueItemOf(store, run.runId);
      t.like(due, { source: 'first_claim', attemptId: run.attemptId, atMs: run.cancelRequestedAtMs });

      const queued = uniqueId('run');
      await store.runStore.createRun({ runId: queued, projectId: 'p' });
      const cancelled = await store.runStore.requestCancellation({
        runId: queued,
        reason: 'user',
        eventId: uniqueId('evt'),
      });
      t.is(await store.repository.getRecord(queued), null, 'no attempt, nothing to dispatch to');
      t.like(await store.runStore.getRun(queued), { status: 'queued', cancelReason: 'user' });
      t.deepEqual(
        (await store.runStore.listEvents(queued)).map((event) => event.type),
        ['run.cancel_requested'],
        'the store does not end a queued run: the cluster route ends one itself (docs/decisions/0340)',
      );
      t.is((await store.runStore.createAttempt({ runId: queued, attemptId: `${queued}-a1` })).kind, 'created');
      const at = cancelled.kind === 'requested' ? cancelled.run.cancelRequestedAtMs : -1;
      t.like(await store.repository.getRecord(queued), {
        status: 'pending',
        attemptId: `${queued}-a1`,
        nextAttemptAtMs: at,
      });

      const claim = claimOf(run, 'worker-a', LEASE_MS);
      const leased = await claimed(t, store, claim);
      t.like(leased, { status: 'leased', version: 1, dispatchCount: 1 });
      await store.advanceTime(LEASE_MS + 20);
      const expired = await dueItemOf(store, run.runId);
      t.like(expired, { source: 'lease_expired', atMs: leased.leaseExpiresAtMs ?? -1 });
    },
  );

  storeTest(
    'claimPage claims a supervisor page in one transaction, each item decided and fenced as its own claim, outcomes in page order (docs/decisions/0023)',
    async (t, store) => {
      const [a, held, b] = [await cancelledRunIn(store), await cancelledRunIn(store), await cancelledRunIn(store)];
      const holder = claimOf(held, 'worker-other');
      const heldRecord = await claimed(t, store, holder);
      const items = [a, held, b].map((run) => ({ ...run, token: createLeaseToken() }));
      const missing = {
        runId: uniqueId('run-missing'),
        attemptId: 'attempt-x',
        cancelRequestedAtMs: 0,
        token: createLeaseToken(),
      };
      const outcomes = await store.repository.claimPage({
        owner: 'worker-page',
        leaseDurationMs: LONG_LEASE_MS,
        items: [...items, missing],
      });
      t.deepEqual(
        outcomes.map((outcome) => outcome.kind),
        ['claimed', 'leased', 'claimed', 'not_eligible'],
      );
      t.like(outcomes[3], { reason: 'run_missing' });
      for (const i of [0, 2]) {
        const outcome = outcomes[i];
        const item = items[i];
        if (outcome?.kind !== 'claimed' || item === undefined) return t.fail('expected claimed');
        t.is(outcome.token, item.token);
        t.like(outcome.record, {
          runId: item.runId,
          status: 'leased',
          leaseOwner: 'worker-page',
          leaseTokenDigest: leaseTokenDigest(item.token),
          dispatchCount: 1,
        });
        // Each claimed item settles on its own, with its own fence.
        const command = { ...item, owner: 'worker-page', leaseDurationMs: LONG_LEASE_MS };
        t.deepEqual(
          await store.repository.recordResult({
            ...resultOf(command, outcome.record, 'termination_requested'),
            token: createLeaseToken(),
          }),
          { kind: 'stale_fence' },
        );
        t.is(
          (await store.repository.recordResult(resultOf(command, outcome.record, 'termination_requested'))).kind,
          'recorded',
        );
      }
      t.deepEqual(
        await store.repository.getRecord(held.runId),
        heldRecord,
        'a live lease in the page is left to its owner',
      );
    },
  );

  /**
   * One run in each state a claim can meet, built the same way twice: one twin is claimed item by
   * item, the other as one page. The page must decide every item exactly as its own claim did.
   */
  const claimTargets = async (
    t: ExecutionContext,
    store: ContractStore,
  ): Promise<Array<Omit<ClaimCommand, 'owner' | 'token' | 'leaseDurationMs'>>> => {
    const { LEASE_MS, RETRY_MS } = durationsOf(store);
    const settledWith = async (result: DispatchResult, retryDelayMs?: number): Promise<CancelledRun> => {
      const run = await cancelledRunIn(store);
      const claim = claimOf(run, 'worker-before');
      t.is(
        (await store.repository.recordResult(resultOf(claim, await claimed(t, store, claim), result, retryDelayMs)))
          .kind,
        'recorded',
      );
      return run;
    };
    const due = await cancelledRunIn(store);
    const held = await cancelledRunIn(store);
    await claimed(t, store, claimOf(held, 'worker-before'));
    const expired = await cancelledRunIn(store);
    await claimed(t, store, claimOf(expired, 'worker-before', LEASE_MS));
    const notDue = await settledWith('dispatch_error', RETRY_DELAY_MAX_MS);
    const retryDue = await settledWith('dispatch_error', RETRY_MS);
    const dispatched = await settledWith('termination_requested');
    const blocked = await settledWith('invalid');
    const terminal = await cancelledRunIn(store);
    t.is(
      (
        await store.runStore.markTerminal({
          runId: terminal.runId,
          status: 'cancelled',
          eventId: uniqueId('evt'),
          attemptId: terminal.attemptId,
        })
      ).kind,
      'terminal',
    );
    const quiet = uniqueId('run');
    await store.runStore.createRun({ runId: quiet, projectId: 'p' });
    await store.runStore.createAttempt({ runId: quiet, attemptId: `${quiet}-a1` });
    const external = await cancelledExternalRunIn(store);
    const mismatched = await cancelledRunIn(store);
    const noAttempt = await cancelledRunIn(store);
    return [
      due,
      held,
      expired,
      notDue,
      retryDue,
      dispatched,
      blocked,
      terminal,
      { runId: quiet, attemptId: `${quiet}-a1`, cancelRequestedAtMs: 0 },
      {
        runId: external.runId,
        attemptId: external.attemptId,
        cancelRequestedAtMs:
          external.cancelled.kind === 'requested' ? (external.cancelled.run.cancelRequestedAtMs ?? 0) : 0,
      },
      { ...mismatched, cancelRequestedAtMs: mismatched.cancelRequestedAtMs + 1 },
      { ...noAttempt, attemptId: 'attempt-missing' },
      { runId: uniqueId('run-missing'), attemptId: 'attempt-x', cancelRequestedAtMs: 0 },
    ];
  };

  storeTest(
    'claimPage decides every item exactly as its own claim: each outcome kind and reason, in one page (docs/decisions/0024)',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      const [single, paged] = [await claimTargets(t, store), await claimTargets(t, store)];
      await store.advanceTime(RETRY_MS + 20); // the short lease and the short retry are now due
      const one: unknown[] = [];
      for (const target of single)
        one.push(
          await store.repository.claim({
            ...target,
            owner: 'worker-now',
            token: createLeaseToken(),
            leaseDurationMs: LONG_LEASE_MS,
          }),
        );
      const page = await store.repository.claimPage({
        owner: 'worker-now',
        leaseDurationMs: LONG_LEASE_MS,
        items: paged.map((target) => ({ ...target, token: createLeaseToken() })),
      });
      const shape = (outcome: unknown) => {
        const { kind, reason, record } = outcome as {
          kind: string;
          reason?: string;
          record?: CancellationDispatchRecord;
        };
        return record === undefined
          ? { kind, reason }
          : {
              kind,
              status: record.status,
              version: record.version,
              dispatchCount: record.dispatchCount,
              leaseOwner: record.leaseOwner,
            };
      };
      t.deepEqual(page.map(shape), one.map(shape));
      t.deepEqual(
        page.map((outcome) => (outcome.kind === 'not_eligible' ? outcome.reason : outcome.kind)),
        [
          'claimed',
          'leased',
          'claimed',
          'not_due',
          'claimed',
          'dispatched',
          'blocked',
          'run_terminal',
          'cancel_not_requested',
          'run_not_runtime',
          'cancel_mismatch',
          'attempt_missing',
          'run_missing',
        ],
      );
      for (const [i, outcome] of page.entries()) {
        if (outcome.kind !== 'claimed') continue;
        t.like(await store.repository.getRecord(paged[i]?.runId ?? ''), {
          status: 'leased',
          leaseOwner: 'worker-now',
          version: outcome.record.version,
        });
      }
    },
  );

  storeTest(
    'claimPage: two pages racing over the same runs in opposite orders grant each run to exactly one owner',
    async (t, store) => {
      const runs = await Promise.all(Array.from({ length: 6 }, () => cancelledRunIn(store)));
      const page = (owner: string, order: CancelledRun[]) =>
        store.repository.claimPage({
          owner,
          leaseDurationMs: LONG_LEASE_MS,
          items: order.map((run) => ({ ...run, token: createLeaseToken() })),
        });
      const [first, second] = await Promise.all([page('worker-a', runs), page('worker-b', [...runs].reverse())]);
      const secondInRunOrder = [...(second ?? [])].reverse();
      for (const [i, run] of runs.entries()) {
        const kinds = [first?.[i]?.kind, secondInRunOrder[i]?.kind].sort();
        t.deepEqual(kinds, ['claimed', 'leased'], run.runId);
        t.is((await store.repository.getRecord(run.runId))?.dispatchCount, 1);
      }
    },
  );

  storeTest(
    'recordResults settles several leases in one call, each with its own fence, run CAS and event; a stale fence stays stale (docs/decisions/0023)',
    async (t, store) => {
      const { RETRY_MS } = durationsOf(store);
      const runs = [await cancelledRunIn(store), await cancelledRunIn(store), await cancelledRunIn(store)];
      const claims = runs.map((run) => claimOf(run, 'worker-page'));
      const records: CancellationDispatchRecord[] = [];
      for (const claim of claims) records.push(await claimed(t, store, claim));
      const commands = claims.map((claim, i) =>
        resultOf(
          claim,
          records[i] as CancellationDispatchRecord,
          i === 1 ? 'dispatch_error' : 'termination_requested',
          i === 1 ? RETRY_MS : undefined,
        ),
      );
      const stale = { ...(commands[2] as RecordResultCommand), token: createLeaseToken() };
      const outcomes = await store.repository.recordResults([
        commands[0] as RecordResultCommand,
        commands[1] as RecordResultCommand,
        stale,
      ]);
      t.deepEqual(
        outcomes.map((outcome) => outcome.kind),
        ['recorded', 'recorded', 'stale_fence'],
      );
      t.like(outcomes[0], {
        record: { status: 'dispatched', leaseOwner: null },
        event: { type: 'run.cancel_dispatched' },
      });
      t.like(outcomes[1], { record: { status: 'retry_wait' }, event: { type: 'run.cancel_dispatch_failed' } });
      t.deepEqual(
        await store.repository.getRecord(runs[2]?.runId ?? ''),
        records[2],
        'the stale settle changed nothing',
      );
      t.deepEqual(
        (await store.runStore.listEvents(runs[0]?.runId ?? '')).map((event) => event.type),
        ['run.cancel_requested', 'run.cancel_dispatched'],
      );
      t.deepEqual(
        await store.repository.recordResults([commands[0] as RecordResultCommand]),
        [{ kind: 'stale_fence' }],
        'a settled lease cannot settle twice',
      );
      await rejectsAsInput(t, store.repository.recordResults([]));
      await rejectsAsInput(
        t,
        store.repository.recordResults([commands[2] as RecordResultCommand, commands[2] as RecordResultCommand]),
      );
      t.deepEqual(await store.repository.getRecord(runs[2]?.runId ?? ''), records[2]);
    },
  );

  storeTest("getAttempts reads a page of attempts in the refs' order, null for a missing one", async (t, store) => {
    const [a, b] = [await cancelledRunIn(store), await cancelledRunIn(store)];
    const got = await store.runStore.getAttempts([
      { runId: b.runId, attemptId: b.attemptId },
      { runId: a.runId, attemptId: 'attempt-missing' },
      { runId: a.runId, attemptId: a.attemptId },
    ]);
    t.deepEqual(got, [
      await store.runStore.getAttempt(b.runId, b.attemptId),
      null,
      await store.runStore.getAttempt(a.runId, a.attemptId),
    ]);
    await rejectsAsInput(t, store.runStore.getAttempts([]));
  });

  storeTest('claimPage refuses a malformed page before any SQL and changes nothing', async (t, store) => {
    const run = await cancelledRunIn(store);
    const before = await snapshot(store, run.runId);
    const item = { ...run, token: createLeaseToken() };
    const page = (items: unknown[]) =>
      store.repository.claimPage({ owner: 'w', leaseDurationMs: LONG_LEASE_MS, items } as never);
    await rejectsAsInput(t, page([]));
    await rejectsAsInput(t, page([item, { ...item, token: createLeaseToken() }]));
    await rejectsAsInput(
      t,
      page(Array.from({ length: DUE_PAGE_MAX + 1 }, (_, i) => ({ ...item, runId: `${run.runId}-${i}` }))),
    );
    await rejectsAsInput(t, page([{ ...item, token: 'short' }]));
    await rejectsAsInput(
      t,
      store.repository.claimPage({ owner: 'w', leaseDurationMs: LEASE_DURATION_MAX_MS + 1, items: [item] }),
    );
    t.deepEqual(await snapshot(store, run.runId), before);
  });

  storeTest(
    'claimDuePage claims the due page as it reads it: due order, the token of each position, the cursor (docs/decisions/0025)',
    async (t, store) => {
      const runnerId = await runnerIn(store);
      const runs: CancelledRun[] = [];
      for (let i = 0; i < 5; i += 1) runs.push(await cancelledRun(store.runStore, { runnerId }));
      const held = runs[1] as CancelledRun;
      const heldRecord = await claimed(t, store, claimOf(held, 'worker-other'));
      const settled = runs[3] as CancelledRun;
      const settleClaim = claimOf(settled, 'worker-other');
      t.is(
        (
          await store.repository.recordResult(
            resultOf(settleClaim, await claimed(t, store, settleClaim), 'termination_requested'),
          )
        ).kind,
        'recorded',
      );
      await cancelledRunIn(store); // due, but another runner's: never on this runner's page
      const expected = await store.repository.duePage({ limit: 2, runnerId });
      const tokens = [createLeaseToken(), createLeaseToken()];
      const first = await store.repository.claimDuePage({
        owner: 'worker-page',
        leaseDurationMs: LONG_LEASE_MS,
        tokens,
        runnerId,
      });
      t.deepEqual(
        first.items.map((entry) => entry.item),
        expected.items,
        'the items duePage lists, in its order',
      );
      t.deepEqual(first.next, expected.next);
      t.is(first.items.length, 2);
      for (const [i, { item, outcome }] of first.items.entries()) {
        if (outcome.kind !== 'claimed') return t.fail(`expected claimed, got ${outcome.kind}`);
        t.is(outcome.token, tokens[i] as string, "the token of the item's position");
        t.like(await store.repository.getRecord(item.runId), {
          status: 'leased',
          leaseOwner: 'worker-page',
          leaseTokenDigest: leaseTokenDigest(tokens[i] as string),
          dispatchCount: 1,
        });
      }
      const rest = await store.repository.claimDuePage({
        owner: 'worker-page',
        leaseDurationMs: LONG_LEASE_MS,
        tokens: [createLeaseToken(), createLeaseToken()],
        runnerId,
        ...(first.next === null ? {} : { after: first.next }),
      });
      t.deepEqual(
        rest.items.map((entry) => entry.outcome.kind),
        ['claimed'],
      );
      const claimedIds = [...first.items, ...rest.items].map((entry) => entry.item.runId).sort();
      t.deepEqual(
        claimedIds,
        [runs[0], runs[2], runs[4]].map((run) => run?.runId).sort(),
        'every due run once; the live lease and the settled run are not due',
      );
      t.is(rest.next, null, 'a short page ends the walk');
      const again = await store.repository.claimDuePage({
        owner: 'worker-late',
        leaseDurationMs: LONG_LEASE_MS,
        tokens: [createLeaseToken()],
        runnerId,
      });
      t.deepEqual(again, { items: [], next: null }, 'nothing of this runner is due any more');
      t.deepEqual(await store.repository.getRecord(held.runId), heldRecord, 'a live lease is left to its owner');
    },
  );

  storeTest(
    'claimDuePage: a page whose supervisor died is claimed again by the next one once its leases expire, with a new fence',
    async (t, store) => {
      const { LEASE_MS } = durationsOf(store);
      const runnerId = await runnerIn(store);
      const runs = [await cancelledRun(store.runStore, { runnerId }), await cancelledRun(store.runStore, { runnerId })];
      const deadTokens = [createLeaseToken(), createLeaseToken()];
      const dead = await store.repository.claimDuePage({
        owner: 'worker-dead',
        leaseDurationMs: LEASE_MS,
        tokens: deadTokens,
        runnerId,
      });
      t.deepEqual(
        dead.items.map((entry) => entry.outcome.kind),
        ['claimed', 'claimed'],
      );
      const early = await store.repository.claimDuePage({
        owner: 'worker-next',
        leaseDurationMs: LONG_LEASE_MS,
        tokens: [createLeaseToken(), createLeaseToken()],
        runnerId,
      });
      t.deepEqual(early.items, [], 'live leases are not due');
      await store.advanceTime(LEASE_MS + 50);
      const tokens = [createLeaseToken(), createLeaseToken()];
      const next = await store.repository.claimDuePage({
        owner: 'worker-next',
        leaseDurationMs: LONG_LEASE_MS,
        tokens,
        runnerId,
      });
      t.deepEqual(
        next.items.map((entry) => [entry.item.source, entry.outcome.kind]),
        [
          ['lease_expired', 'claimed'],
          ['lease_expired', 'claimed'],
        ],
      );
      t.deepEqual(next.items.map((entry) => entry.item.runId).sort(), runs.map((run) => run.runId).sort());
      for (const [i, { item }] of next.items.entries()) {
        const run = runs.find((candidate) => candidate.runId === item.runId) as CancelledRun;
        const record = await store.repository.getRecord(run.runId);
        t.like(record, {
          leaseOwner: 'worker-next',
          leaseTokenDigest: leaseTokenDigest(tokens[i] as string),
          dispatchCount: 2,
        });
        const deadToken = deadTokens[dead.items.findIndex((entry) => entry.item.runId === run.runId)] as string;
        const stale = {
          runId: run.runId,
          attemptId: run.attemptId,
          owner: 'worker-dead',
          token: deadToken,
          expectedVersion: (record?.version ?? 0) - 1,
          result: 'termination_requested' as const,
          eventId: uniqueId('evt'),
        };
        t.deepEqual(
          await store.repository.recordResult(stale),
          { kind: 'stale_fence' },
          "the dead owner's fence no longer settles",
        );
      }
    },
  );

  storeTest('claimDuePage refuses a malformed command before any SQL and changes nothing', async (t, store) => {
    const runnerId = await runnerIn(store);
    const run = await cancelledRun(store.runStore, { runnerId });
    const before = await snapshot(store, run.runId);
    const token = createLeaseToken();
    const page = (command: Record<string, unknown>) =>
      store.repository.claimDuePage({
        owner: 'w',
        leaseDurationMs: LONG_LEASE_MS,
        tokens: [token],
        runnerId,
        ...command,
      } as never);
    await rejectsAsInput(t, page({ tokens: [] }));
    await rejectsAsInput(t, page({ tokens: token }));
    await rejectsAsInput(t, page({ tokens: [token, token] }));
    await rejectsAsInput(t, page({ tokens: Array.from({ length: DUE_PAGE_MAX + 1 }, () => createLeaseToken()) }));
    await rejectsAsInput(t, page({ tokens: ['short'] }));
    await rejectsAsInput(t, page({ leaseDurationMs: LEASE_DURATION_MAX_MS + 1 }));
    await rejectsAsInput(t, page({ owner: '' }));
    await rejectsAsInput(t, page({ after: { atMs: 1 } }));
    await rejectsAsInput(t, page({ runnerId: 'bad id' }));
    await rejectsAsInput(t, page({ limit: 1 }));
    t.deepEqual(await snapshot(store, run.runId), before);
  });

  storeTest('the raw token appears only in the claimed outcome', async (t, store) => {
    const run = await cancelledRunIn(store);
    const command = claimOf(run, 'worker-a');
    const outcome = await store.repository.claim(command);
    t.is(outcome.kind === 'claimed' ? outcome.token : undefined, command.token);
    const record = await store.repository.getRecord(run.runId);
    t.false(JSON.stringify(record).includes(command.token));
    t.is(record?.leaseTokenDigest, leaseTokenDigest(command.token));
    const lost = await store.repository.claim(claimOf(run, 'worker-b'));
    t.deepEqual(Object.keys(lost), ['kind']);
  });

  storeTest(
    'cancel intent is written with its time, reason and event at once, and an existing intent is kept',
    async (t, store) => {
      const run = await cancelledRunIn(store);
      const stored = await store.runStore.getRun(run.runId);
      t.like(stored, { cancelReason: 'user', cancelRequestedAtMs: run.cancelRequestedAtMs, status: 'running' });
      const events = await store.runStore.listEvents(run.runId);
      t.deepEqual(
        events.map((event) => [event.seq, event.type, event.payload]),
        [[1, 'run.cancel_requested', { reason: 'user' }]],
      );
      t.is(stored?.nextEventSeq, 2);
      await store.advanceTime(20);
      const again = await store.runStore.requestCancellation({
        runId: run.runId,
        reason: 'shutdown',
        eventId: uniqueId('evt'),
      });
      t.is(again.kind, 'already_requested');
      t.like(await store.runStore.getRun(run.runId), {
        cancelReason: 'user',
        cancelRequestedAtMs: run.cancelRequestedAtMs,
      });
      t.is((await store.runStore.listEvents(run.runId)).length, 1);
    },
  );

  storeTest(
    'requestCancellation answers each outcome with what it wrote: the run and event as stored, an existing intent, an ended or missing run writing nothing (docs/decisions/0340)',
    async (t, store) => {
      const runId = uniqueId('run');
      await store.runStore.createRun({ runId, projectId: 'p' });
      await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
      const before = await store.runStore.getRun(runId);
      const eventId = uniqueId('evt');
      const requested = await store.runStore.requestCancellation({ runId, reason: 'timeout', eventId });
      const stored = await store.runStore.getRun(runId);
      if (requested.kind !== 'requested' || before === null || stored === null)
        return t.fail(`expected requested on a stored run, got ${requested.kind}`);
      t.deepEqual(requested.run, stored, 'the answered run is the stored row');
      t.like(stored, {
        status: 'running',
        cancelReason: 'timeout',
        version: before.version + 1,
        nextEventSeq: before.nextEventSeq + 1,
        updatedAtMs: stored.cancelRequestedAtMs,
      });
      t.deepEqual(requested.event, {
        id: eventId,
        runId,
        seq: before.nextEventSeq,
        type: 'run.cancel_requested',
        payload: { reason: 'timeout' },
        createdAtMs: stored.cancelRequestedAtMs,
      });
      t.deepEqual(await store.runStore.listEvents(runId), [requested.event], 'the answered event is the stored one');
      t.like(await store.repository.getRecord(runId), {
        status: 'pending',
        attemptId: `${runId}-a1`,
        version: 0,
        nextAttemptAtMs: stored.cancelRequestedAtMs,
        createdAtMs: stored.cancelRequestedAtMs,
      });

      await store.advanceTime(20);
      t.deepEqual(
        await store.runStore.requestCancellation({ runId, reason: 'user', eventId: uniqueId('evt') }),
        { kind: 'already_requested', run: stored },
        'an existing intent answers the run as it is, unchanged',
      );
      t.deepEqual(await store.runStore.getRun(runId), stored);

      const ended = uniqueId('run');
      await store.runStore.createRun({ runId: ended, projectId: 'p' });
      await store.runStore.markTerminal({ runId: ended, status: 'failed', eventId: uniqueId('evt') });
      const endedBefore = await snapshot(store, ended);
      t.deepEqual(
        await store.runStore.requestCancellation({ runId: ended, reason: 'user', eventId: uniqueId('evt') }),
        { kind: 'run_terminal' },
      );
      t.deepEqual(await snapshot(store, ended), endedBefore, 'an ended run is not touched');
      const missing = uniqueId('run-missing');
      t.deepEqual(await store.runStore.requestCancellation({ runId: missing, reason: 'user', eventId: 'evt-m' }), {
        kind: 'run_missing',
      });
      t.is(await store.runStore.getRun(missing), null);
    },
  );

  storeTest(
    'requestCancellation gives an external run its intent but no dispatch (docs/decisions/0340)',
    async (t, store) => {
      const external = await cancelledExternalRunIn(store);
      t.is(external.cancelled.kind, 'requested');
      t.like(await store.runStore.getRun(external.runId), {
        owner: 'external',
        status: 'running',
        cancelReason: 'policy',
      });
      t.is(await store.repository.getRecord(external.runId), null, 'pidfence dispatches only to runs it runs');
    },
  );

  storeTest(
    'bad input: every malformed command is rejected with a typed error and changes nothing',
    async (t, store) => {
      const run = await cancelledRunIn(store);
      const claim = claimOf(run, 'worker-a');
      const record = await claimed(t, store, claim);
      const good = resultOf(claim, record, 'termination_requested');
      const before = await snapshot(store, run.runId);
      const bad: ReadonlyArray<() => Promise<unknown>> = [
        () => store.repository.claim({ ...claim, leaseExpiresAtMs: 5 } as never),
        () => store.repository.claim({ ...claim, token: 'short' }),
        () => store.repository.claim({ ...claim, runId: '' }),
        () => store.repository.claim(null as never),
        () => store.repository.recordResult({ ...good, nowMs: 1 } as never),
        () => store.repository.recordResult({ ...good, result: 'killed' as never }),
        () => store.repository.recordResult({ ...good, retryDelayMs: 100 }),
        () => store.repository.recordResult({ ...good, expectedVersion: -1 }),
        () => store.repository.duePage({ limit: 0 }),
        () => store.repository.duePage({ after: { atMs: 1 } } as never),
        () => store.repository.getRecord('bad id'),
        () => store.runStore.requestCancellation({ runId: run.runId, reason: 'because' as never, eventId: 'e' }),
        () => store.runStore.markTerminal({ runId: run.runId, status: 'running' as never, eventId: 'e' }),
        () =>
          store.runStore.advanceAttempt({
            runId: run.runId,
            attemptId: run.attemptId,
            from: 'running',
            to: 'starting',
          }),
        () => store.runStore.createAttempt({ runId: run.runId, attemptId: 'a', timeoutMs: 0 }),
        () => store.runStore.createRun({ runId: run.runId, projectId: 'p', owner: 'root' as never }),
      ];
      for (const attempt of bad) await rejectsAsInput(t, attempt());
      t.deepEqual(await snapshot(store, run.runId), before);
      t.is((await store.repository.recordResult(good)).kind, 'recorded', 'the store still works');
    },
  );

  storeTest('the run store keeps one active attempt and writes pid and handle once', async (t, store) => {
    const runId = uniqueId('run');
    await store.runStore.createRun({ runId, projectId: 'p' });
    t.deepEqual(await store.runStore.createRun({ runId, projectId: 'p' }), { kind: 'exists' });
    t.is((await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1`, timeoutMs: 250 })).kind, 'created');
    t.deepEqual(await store.runStore.createAttempt({ runId, attemptId: `${runId}-a2` }), {
      kind: 'active_attempt_exists',
    });
    const started = await store.runStore.advanceAttempt({
      runId,
      attemptId: `${runId}-a1`,
      from: 'claimed',
      to: 'starting',
      pid: 7,
      handle: 'h',
    });
    t.is(started.kind, 'advanced');
    t.deepEqual(
      await store.runStore.advanceAttempt({
        runId,
        attemptId: `${runId}-a1`,
        from: 'starting',
        to: 'running',
        pid: 8,
        handle: 'h2',
      }),
      { kind: 'stale' },
    );
    const attempt = await store.runStore.getAttempt(runId, `${runId}-a1`);
    t.like(attempt, { status: 'starting', pid: 7, handle: 'h' });
    t.is(attempt?.deadlineAtMs, (attempt?.createdAtMs ?? 0) + 250);
  });
}

/** Registered only for stores whose bytes can be read (SQLite); PostgreSQL proves gate 11 its own way. */
export function registerRawTokenScan(factory: ContractStoreFactory): void {
  test(`gate 10: the raw token never appears in the database bytes, the digest does [${factory.name}]`, async (t) => {
    const store = await factory.open();
    try {
      const tokens: string[] = [];
      const digests: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        const run = await cancelledRunIn(store);
        const claim = claimOf(run, `worker-${i}`);
        const record = await claimed(t, store, claim);
        tokens.push(claim.token);
        digests.push(record.leaseTokenDigest ?? '');
        if (i % 2 === 0) await store.repository.recordResult(resultOf(claim, record, 'termination_requested'));
      }
      const bytes = rawBytesOf(store);
      for (const token of tokens) {
        t.false(bytes.includes(Buffer.from(token, 'utf8')), 'token text absent');
        t.false(bytes.includes(Buffer.from(token, 'base64url')), 'token bytes absent');
      }
      // The scan can see stored text: the digest of a still-leased claim is there.
      t.true(bytes.includes(Buffer.from(digests[1] ?? '', 'utf8')));
    } finally {
      await store.close();
    }
  });
}

function rawBytesOf(store: ContractStore): Buffer {
  if (store.rawBytes === undefined)
    throw new Error('this store cannot show its bytes: register the raw token scan only for stores that can');
  return store.rawBytes();
}
