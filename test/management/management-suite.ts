// The management gates of design/dispatch §6 (14-16, 18, and the one-query half of 17) as one suite run
// unchanged against every store, like the dispatch contract suite: real SQLite files, a real
// PostgreSQL as the runtime role, real processes where a dispatch is driven end to end.

import test, { type ExecutionContext } from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import {
  BLOCKED_PAGE_SIZE,
  createLeaseToken,
  leaseTokenDigest,
  type BlockingResult,
  type DispatchResult,
} from '../../lib/contract/index';
import {
  authorizeCancel,
  ManagementPlane,
  type GrantAdministration,
  type ManagementStore,
} from '../../lib/management/index';
import { formatHandle, handleFromIdentity } from '../../lib/process/index';
import type { DispatchRepository } from '../../lib/store/dispatch-repository';
import type { ExecutionStore } from '../../lib/store/execution-store';
import type { RunStore } from '../../lib/store/run-store';
import { CountingController, dispatcherFor, startJob } from '../dispatch/world';
import { uniqueId } from '../helpers/unique-id';
import { cancelledRun, PLACEHOLDER_BINDING } from '../helpers/cancelled-runs';

export interface ManagementWorld {
  readonly runStore: RunStore;
  readonly repository: DispatchRepository;
  /** Completes attempts with their exit (the runs `list` and `show` report). */
  readonly executionStore: ExecutionStore;
  readonly management: ManagementStore;
  /** The store owner's grant writes. */
  readonly grants: GrantAdministration;
  /** The injected clock on SQLite, a real sleep on PostgreSQL. */
  advanceTime(ms: number): Promise<void>;
  /** The data statements (no BEGIN/COMMIT/SET) `work` sent to the database. */
  statementsOf<T>(work: () => Promise<T>): Promise<{ result: T; statements: readonly string[] }>;
  /** management_audit rows of a run, read by the owner. */
  auditRows(runId: string): Promise<ReadonlyArray<{ actor: string; expectedVersion: number; expectedResult: string }>>;
  /** Makes the database refuse audit rows of `actor` (a trigger or constraint the owner adds); returns its removal. */
  injectAuditFailure(actor: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface ManagementWorldFactory {
  readonly name: string;
  open(): Promise<ManagementWorld>;
}

const OWNER = 'worker-7:pid-4242';
/** The process binding of every fixture run: no view may show it. */
const FIXTURE_HANDLE = PLACEHOLDER_BINDING.handle;
const PROJECT = 'project-a';
const OTHER_PROJECT = 'project-b';

/** A run whose dispatch settled with `result` through the real claim/result path; returns its token too. */
export async function settledRun(
  world: ManagementWorld,
  projectId: string,
  result: DispatchResult,
  retryDelayMs?: number,
): Promise<{ runId: string; token: string }> {
  const run = await cancelledRun(world.runStore, { projectId });
  const token = createLeaseToken();
  const claim = await world.repository.claim({ ...run, owner: OWNER, token, leaseDurationMs: 60_000 });
  if (claim.kind !== 'claimed') throw new Error(`fixture: claim was ${claim.kind}`);
  const base = {
    runId: run.runId,
    attemptId: run.attemptId,
    owner: OWNER,
    token,
    expectedVersion: claim.record.version,
    result,
    eventId: uniqueId('evt'),
  };
  const recorded = await world.repository.recordResult(retryDelayMs === undefined ? base : { ...base, retryDelayMs });
  if (recorded.kind !== 'recorded') throw new Error('fixture: result was stale');
  return { runId: run.runId, token };
}

/** A run whose dispatch is leased (claimed, not settled). */
async function leasedRun(
  world: ManagementWorld,
  projectId: string,
  leaseDurationMs = 60_000,
): Promise<{ runId: string; token: string }> {
  const run = await cancelledRun(world.runStore, { projectId });
  const token = createLeaseToken();
  const claim = await world.repository.claim({ ...run, owner: OWNER, token, leaseDurationMs });
  if (claim.kind !== 'claimed') throw new Error(`fixture: claim was ${claim.kind}`);
  return { runId: run.runId, token };
}

type RunFixtureState = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** A run in `state`, ended (where it ends) through the real completion path with its exit. */
async function runIn(world: ManagementWorld, projectId: string, state: RunFixtureState, exitCode = 0): Promise<string> {
  const runId = uniqueId('run');
  const attemptId = `${runId}-a1`;
  await world.runStore.createRun({ runId, projectId });
  if (state === 'queued') return runId;
  await world.runStore.createAttempt({ runId, attemptId });
  await world.runStore.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'running', ...PLACEHOLDER_BINDING });
  if (state === 'running') return runId;
  if (state === 'cancelled')
    await world.runStore.requestCancellation({ runId, reason: 'user', eventId: uniqueId('evt') });
  const ended = await world.executionStore.completeAttempt({
    runId,
    attemptId,
    status: state,
    cause: state === 'cancelled' ? 'stopped' : 'receipt',
    exit: state === 'cancelled' ? null : { exitCode, signal: null },
    attemptEventId: uniqueId('evt'),
    runEventId: uniqueId('evt'),
    journalReceipt: false,
  });
  if (ended.kind !== 'completed') throw new Error(`fixture: completion was ${ended.kind}`);
  return runId;
}

/** What no run view may carry: process identity, the runner, lease and receipt secrets. */
function assertNoSecrets(t: ExecutionContext, view: unknown, ...secrets: string[]): void {
  const text = JSON.stringify(view);
  for (const key of [
    '"pid"',
    '"handle"',
    '"runnerId"',
    '"leaseOwner"',
    '"leaseTokenDigest"',
    '"receiptTokenDigest"',
    '"command"',
    '"args"',
    '"env"',
  ]) {
    t.false(text.includes(key), `a view carries ${key}`);
  }
  for (const secret of [FIXTURE_HANDLE, OWNER, ...secrets])
    t.false(text.includes(secret), `a view carries ${secret.slice(0, 12)}`);
}

async function grant(
  world: ManagementWorld,
  subject: string,
  projectId: string,
  ...permissions: Array<'run.read' | 'run.stop' | 'grants.write'>
): Promise<void> {
  for (const permission of permissions) await world.grants.writeGrant({ subject, projectId, permission }, 'test-owner');
}

function planeFor(
  world: ManagementWorld,
  subject: string,
  options: Partial<ConstructorParameters<typeof ManagementPlane>[0]> = {},
): ManagementPlane {
  return new ManagementPlane({ store: world.management, principal: subject, ...options });
}

async function refused(t: ExecutionContext, promise: Promise<unknown>, code: string): Promise<void> {
  const error = await t.throwsAsync(promise);
  t.true(error instanceof PidfenceError, `expected a PidfenceError, got ${String(error)}`);
  t.is((error as PidfenceError).code, code);
}

/** Everything a rearm could have written: the record, the event list, the audit rows. */
async function writtenState(world: ManagementWorld, runId: string): Promise<string> {
  return JSON.stringify([
    await world.repository.getRecord(runId),
    await world.runStore.listEvents(runId),
    await world.auditRows(runId),
  ]);
}

export function registerManagementSuite(factory: ManagementWorldFactory): void {
  const { name } = factory;
  const withWorld = async (t: ExecutionContext): Promise<ManagementWorld> => {
    const world = await factory.open();
    t.teardown(() => world.close());
    return world;
  };

  test(`gate 14: a run.read viewer sees low-sensitivity facts only; no response carries lease owner, token, digest, pid or handle [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    await grant(world, viewer, PROJECT, 'run.read');
    const blocked = await settledRun(world, PROJECT, 'identity_mismatch');
    const leased = await leasedRun(world, PROJECT);
    const plane = planeFor(world, viewer);
    const blockedView = await plane.inspect(blocked.runId);
    t.like(blockedView, {
      runId: blocked.runId,
      projectId: PROJECT,
      attemptId: `${blocked.runId}-a1`,
      status: 'blocked',
      version: 2,
      dispatchCount: 1,
      lastResult: 'identity_mismatch',
      nextAttemptAtMs: null,
    });
    t.true(typeof blockedView.blockedAtMs === 'number');
    t.deepEqual(Object.keys(blockedView).sort(), [
      'attemptId',
      'blockedAtMs',
      'dispatchCount',
      'lastDispatchedAtMs',
      'lastResult',
      'nextAttemptAtMs',
      'projectId',
      'runId',
      'status',
      'updatedAtMs',
      'version',
    ]);
    const responses = [
      blockedView,
      await plane.inspect(leased.runId),
      await plane.summary(PROJECT),
      await plane.blockedPage(PROJECT),
    ];
    const text = JSON.stringify(responses);
    for (const secret of [
      OWNER,
      'worker-7',
      blocked.token,
      leased.token,
      leaseTokenDigest(blocked.token),
      leaseTokenDigest(leased.token),
      '"pid"',
      'leaseOwner',
      'leaseTokenDigest',
      'handle',
    ]) {
      t.false(text.includes(secret), `a response carries ${secret.slice(0, 12)}`);
    }
    // The leased record really has an owner and digest in the store: the scan above could find them.
    t.is((await world.repository.getRecord(leased.runId))?.leaseTokenDigest, leaseTokenDigest(leased.token));
  });

  test(`gate 14: without run.read nothing is shown; run.read alone cannot rearm; another project's grant does not count [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const stranger = uniqueId('stranger');
    await grant(world, viewer, PROJECT, 'run.read');
    await grant(world, stranger, OTHER_PROJECT, 'run.read', 'run.stop');
    const blocked = await settledRun(world, PROJECT, 'pid_mismatch');
    const before = await writtenState(world, blocked.runId);
    const expectation = { expectedVersion: 2, expectedStatus: 'blocked', expectedResult: 'pid_mismatch' } as const;
    await refused(t, planeFor(world, stranger).inspect(blocked.runId), 'ERR_PIDFENCE_RUN_NOT_FOUND');
    await refused(t, planeFor(world, stranger).summary(PROJECT), 'ERR_PIDFENCE_NOT_PERMITTED');
    await refused(t, planeFor(world, stranger).blockedPage(PROJECT), 'ERR_PIDFENCE_NOT_PERMITTED');
    await refused(t, planeFor(world, stranger).rearm(blocked.runId, expectation), 'ERR_PIDFENCE_RUN_NOT_FOUND');
    await refused(t, planeFor(world, viewer).rearm(blocked.runId, expectation), 'ERR_PIDFENCE_NOT_PERMITTED');
    t.is(await writtenState(world, blocked.runId), before, 'nothing was written');
    t.is((await planeFor(world, viewer).inspect(blocked.runId)).status, 'blocked');
  });

  test(`gate 15: rearm moves blocked to a retry due at the store's now, with one rearmed RunEvent and one audit row; the dispatcher re-verifies and sends no signal [${name}]`, async (t) => {
    const world = await withWorld(t);
    const operator = uniqueId('operator');
    await grant(world, operator, PROJECT, 'run.read', 'run.stop');
    // A real process whose recorded identity is from another boot: the controller refuses it as
    // identity_mismatch, so the dispatch blocks and no signal is ever sent.
    const job = startJob(t);
    const recorded = handleFromIdentity(job.identity);
    const otherBoot = `${recorded.bootId.slice(0, -1)}${recorded.bootId.endsWith('0') ? '1' : '0'}`;
    const handle = formatHandle({ ...recorded, bootId: otherBoot });
    const runId = uniqueId('run');
    const attemptId = `${runId}-a1`;
    await world.runStore.createRun({ runId, projectId: PROJECT });
    await world.runStore.createAttempt({ runId, attemptId });
    await world.runStore.advanceAttempt({
      runId,
      attemptId,
      from: 'claimed',
      to: 'running',
      pid: job.identity.pid,
      handle,
    });
    const cancelled = await world.runStore.requestCancellation({ runId, reason: 'user', eventId: uniqueId('evt') });
    const target = {
      runId,
      attemptId,
      cancelRequestedAtMs: cancelled.kind === 'requested' ? (cancelled.run.cancelRequestedAtMs ?? -1) : -1,
    };
    const controller = new CountingController();
    const dispatcher = dispatcherFor(world, [controller]);
    t.like(await dispatcher.dispatch(target), { kind: 'recorded', result: 'identity_mismatch', status: 'blocked' });

    const plane = planeFor(world, operator);
    const blocked = await plane.inspect(runId);
    t.like(blocked, { status: 'blocked', lastResult: 'identity_mismatch' });
    const eventsBefore = (await world.runStore.listEvents(runId)).length;
    const rearmed = await plane.rearm(runId, {
      expectedVersion: blocked.version,
      expectedStatus: 'blocked',
      expectedResult: 'identity_mismatch',
    });
    t.like(rearmed, {
      status: 'retry_wait',
      version: blocked.version + 1,
      dispatchCount: blocked.dispatchCount,
      blockedAtMs: null,
      lastResult: 'identity_mismatch',
    });
    // Due at the store's now: the update time of the same transaction, never a caller's clock.
    t.is(rearmed.nextAttemptAtMs, rearmed.updatedAtMs);
    const events = await world.runStore.listEvents(runId);
    t.is(events.length, eventsBefore + 1);
    t.like(events[events.length - 1], {
      type: 'run.cancel_dispatch_rearmed',
      payload: { attemptId, dispatchCount: blocked.dispatchCount, result: 'identity_mismatch' },
      createdAtMs: rearmed.updatedAtMs,
    });
    t.deepEqual(await world.auditRows(runId), [
      { actor: operator, expectedVersion: blocked.version, expectedResult: 'identity_mismatch' },
    ]);

    // The rearmed dispatch is due now; the dispatcher claims it, re-verifies, blocks again: zero signals.
    // Other tests' runs may share this database and be due earlier: page until ours or the end.
    let found = false;
    for (let page = await world.repository.duePage({ limit: 64 }), pages = 0; !found && pages < 100; pages++) {
      found = page.items.some((item) => item.runId === runId && item.source === 'retry_due');
      if (found || page.next === null) break;
      page = await world.repository.duePage({ limit: 64, after: page.next });
    }
    t.true(found, 'the rearmed dispatch is in the due query');
    t.like(await dispatcher.dispatch(target), {
      kind: 'recorded',
      result: 'identity_mismatch',
      status: 'blocked',
      dispatchCount: 2,
    });
    t.is(controller.calls, 2);
    t.is(
      await Promise.race([
        job.exited.then(() => 'exited'),
        new Promise((resolve) => setTimeout(() => resolve('alive'), 100)),
      ]),
      'alive',
      'the process was never signalled',
    );
  });

  test(`gate 15: stale version, wrong result, not blocked, drift of authorization and a concurrent rearm all fail closed and write nothing [${name}]`, async (t) => {
    const world = await withWorld(t);
    const operator = uniqueId('operator');
    await grant(world, operator, PROJECT, 'run.read', 'run.stop');
    const plane = planeFor(world, operator);
    const expect = (expectedVersion: number, expectedResult: BlockingResult) =>
      ({ expectedVersion, expectedStatus: 'blocked', expectedResult }) as const;

    const blocked = await settledRun(world, PROJECT, 'unsupported');
    const before = await writtenState(world, blocked.runId);
    await refused(t, plane.rearm(blocked.runId, expect(1, 'unsupported')), 'ERR_PIDFENCE_REARM_STALE');
    await refused(t, plane.rearm(blocked.runId, expect(2, 'invalid')), 'ERR_PIDFENCE_REARM_RESULT_MISMATCH');
    t.is(await writtenState(world, blocked.runId), before);

    const waiting = await settledRun(world, PROJECT, 'dispatch_error', 60_000);
    const waitingBefore = await writtenState(world, waiting.runId);
    await refused(t, plane.rearm(waiting.runId, expect(2, 'unsupported')), 'ERR_PIDFENCE_REARM_NOT_BLOCKED');
    t.is(await writtenState(world, waiting.runId), waitingBefore);
    await refused(t, plane.rearm(uniqueId('run'), expect(2, 'unsupported')), 'ERR_PIDFENCE_RUN_NOT_FOUND');

    // Authorization drift: run.stop is revoked after the up-front check, before the transaction.
    const drifting = planeFor(world, operator, {
      hooks: {
        afterAuthorization: async () => {
          await world.grants.revokeGrant({ subject: operator, projectId: PROJECT, permission: 'run.stop' });
        },
      },
    });
    await refused(t, drifting.rearm(blocked.runId, expect(2, 'unsupported')), 'ERR_PIDFENCE_NOT_PERMITTED');
    t.is(await writtenState(world, blocked.runId), before, 'a revoked permission wrote nothing');
    await grant(world, operator, PROJECT, 'run.stop');

    // Mutation drift: another operator rearms between this one's check and its transaction.
    const rival = uniqueId('rival');
    await grant(world, rival, PROJECT, 'run.read', 'run.stop');
    const racing = planeFor(world, operator, {
      hooks: {
        afterAuthorization: async () => {
          await planeFor(world, rival).rearm(blocked.runId, expect(2, 'unsupported'));
        },
      },
    });
    await refused(t, racing.rearm(blocked.runId, expect(2, 'unsupported')), 'ERR_PIDFENCE_REARM_STALE');
    const audit = await world.auditRows(blocked.runId);
    t.deepEqual(
      audit.map((row) => row.actor),
      [rival],
      'only the winner is audited',
    );
    t.is(
      (await world.runStore.listEvents(blocked.runId)).filter((event) => event.type === 'run.cancel_dispatch_rearmed')
        .length,
      1,
    );
    t.like(await plane.inspect(blocked.runId), { status: 'retry_wait', version: 3 });
  });

  test(`gate 16: summary counts the five states and each blocking result, they add up, and the assessment follows clear → converging → attention_required [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    const plane = planeFor(world, viewer);
    t.like(await plane.summary(project), { total: 0, assessment: 'clear', overdue: 0, running: 0 });
    // docs/decisions/0140: a running job is in flight; once it ended, nothing is.
    const job = await runIn(world, project, 'running');
    t.like(await plane.summary(project), { total: 0, assessment: 'converging', running: 1 });
    await world.executionStore.completeAttempt({
      runId: job,
      attemptId: `${job}-a1`,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
      attemptEventId: uniqueId('evt'),
      runEventId: uniqueId('evt'),
      journalReceipt: false,
    });
    t.like(await plane.summary(project), { total: 0, assessment: 'clear', running: 0 });
    // A settled stop whose job was not seen ending yet: still running, so still converging.
    await settledRun(world, project, 'termination_requested');
    t.like(await plane.summary(project), { total: 1, assessment: 'converging', running: 1, states: { dispatched: 1 } });
    await leasedRun(world, project);
    await settledRun(world, project, 'controller_missing', 60_000);
    t.like(await plane.summary(project), {
      total: 3,
      assessment: 'converging',
      states: { leased: 1, retry_wait: 1, dispatched: 1, blocked: 0 },
    });
    await settledRun(world, project, 'identity_mismatch');
    await settledRun(world, project, 'identity_mismatch');
    await settledRun(world, project, 'invalid');
    await settledRun(world, OTHER_PROJECT, 'pid_mismatch');
    const summary = await plane.summary(project);
    t.deepEqual(summary.states, { pending: 0, leased: 1, retry_wait: 1, dispatched: 1, blocked: 3 });
    t.deepEqual(summary.blockingResults, { identity_mismatch: 2, pid_mismatch: 0, unsupported: 0, invalid: 1 });
    // Every fixture's job is still running (nothing completed its attempt); the other project's is not counted.
    t.like(summary, { projectId: project, total: 6, overdue: 0, running: 6, assessment: 'attention_required' });
    t.deepEqual(Object.keys(summary).sort(), [
      'asOfMs',
      'assessment',
      'blockingResults',
      'overdue',
      'overdueAfterMs',
      'projectId',
      'runEnded',
      'running',
      'states',
      'total',
    ]);
    t.false(/"run-|worker-7/.test(JSON.stringify(summary)), 'no run, attempt or lease identity');
  });

  test(`gate 16: a dispatch overdue beyond the configured bound makes the summary attention_required with nothing blocked [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    const plane = planeFor(world, viewer, { overdueAfterMs: 1_000 });
    await settledRun(world, project, 'handle_missing', 10);
    t.like(await plane.summary(project), { assessment: 'converging', overdue: 0 });
    await world.advanceTime(1_100);
    t.like(await plane.summary(project), {
      assessment: 'attention_required',
      overdue: 1,
      states: { blocked: 0, retry_wait: 1 },
    });
  });

  test(`gate 16: an unsettled dispatch of a run that already ended is nothing in flight: it neither keeps the project converging nor turns overdue [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    const plane = planeFor(world, viewer, { overdueAfterMs: 1_000 });
    // The stop could not be made (no handle yet) and waits to retry; then the job ends on its own.
    const { runId } = await settledRun(world, project, 'handle_missing', 10);
    t.like(await plane.summary(project), {
      assessment: 'converging',
      runEnded: 0,
      running: 1,
      states: { retry_wait: 1 },
    });
    const ended = await world.executionStore.completeAttempt({
      runId,
      attemptId: `${runId}-a1`,
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
      attemptEventId: uniqueId('evt'),
      runEventId: uniqueId('evt'),
      journalReceipt: false,
    });
    t.is(ended.kind, 'completed');
    t.like(await plane.summary(project), {
      assessment: 'clear',
      runEnded: 1,
      running: 0,
      overdue: 0,
      states: { retry_wait: 1 },
    });
    await world.advanceTime(1_100);
    t.like(
      await plane.summary(project),
      { assessment: 'clear', runEnded: 1, overdue: 0 },
      'past the overdue bound, still nothing to do',
    );
  });

  test(`gate 17: summary sends exactly one statement — the grant check and every count together [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    await grant(world, viewer, PROJECT, 'run.read');
    await settledRun(world, PROJECT, 'invalid');
    const plane = planeFor(world, viewer);
    const { result, statements } = await world.statementsOf(() => plane.summary(PROJECT));
    t.is(statements.length, 1, statements.join('\n---\n'));
    t.regex(statements[0] ?? '', /management_grants[\s\S]*FROM cancellation_dispatches WHERE project_id/);
    t.is(result.states.blocked >= 1, true);
    const denied = await world.statementsOf(() =>
      planeFor(world, uniqueId('nobody'))
        .summary(PROJECT)
        .catch((error: unknown) => error),
    );
    t.is(denied.statements.length, 1, 'a refusal costs the same one statement');
    t.is((denied.result as PidfenceError).code, 'ERR_PIDFENCE_NOT_PERMITTED');
  });

  test(`gate 18: blocked pages hold exactly 16 items in (blockedAtMs, runId) order, only run id and blocked time, and the cursor pins the first page's time [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    const results: BlockingResult[] = ['identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid'];
    const blocked: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      blocked.push((await settledRun(world, project, results[i % 4] as BlockingResult)).runId);
      if (i % 3 === 0) await world.advanceTime(5);
    }
    await settledRun(world, OTHER_PROJECT, 'invalid');
    await world.advanceTime(5);
    const plane = planeFor(world, viewer);
    const first = await plane.blockedPage(project);
    t.is(first.items.length, BLOCKED_PAGE_SIZE);
    t.truthy(first.next);
    for (const item of first.items) t.deepEqual(Object.keys(item).sort(), ['blockedAtMs', 'runId']);

    // Blocked after the first page: must not appear on this walk's later pages.
    await world.advanceTime(5);
    const late = await settledRun(world, project, 'invalid');
    const second = await plane.blockedPage(project, first.next ?? undefined);
    t.is(second.items.length, 4);
    t.is(second.next, null);
    t.is(second.asOfMs, first.asOfMs);
    const walked = [...first.items, ...second.items];
    t.false(walked.some((item) => item.runId === late.runId));
    t.deepEqual(walked.map((item) => item.runId).sort(), [...blocked].sort());
    const keys = walked.map((item) => [item.blockedAtMs, item.runId] as const);
    const sorted = [...keys].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    t.deepEqual(keys, sorted, 'strict (blockedAtMs, runId) order');
    t.is(new Set(walked.map((item) => item.runId)).size, 20, 'no item twice');

    // A fresh walk sees the late one; a cursor from another project is refused.
    const fresh = await plane.blockedPage(project, (await plane.blockedPage(project)).next ?? undefined);
    t.true(fresh.items.some((item) => item.runId === late.runId));
    await grant(world, viewer, OTHER_PROJECT, 'run.read');
    await refused(t, plane.blockedPage(OTHER_PROJECT, first.next ?? undefined), 'ERR_PIDFENCE_CURSOR_PROJECT');
    await refused(t, plane.blockedPage(project, 'bp1.not-a-cursor'), 'ERR_PIDFENCE_INVALID_CURSOR');
  });

  test(`gate 14: another project's run answers inspect, rearm, show and cancel exactly like a missing run, with no project id [${name}]`, async (t) => {
    const world = await withWorld(t);
    const stranger = uniqueId('stranger');
    await grant(world, stranger, OTHER_PROJECT, 'run.read', 'run.stop', 'grants.write');
    const foreign = await settledRun(world, PROJECT, 'pid_mismatch');
    const missing = uniqueId('run');
    const plane = planeFor(world, stranger);
    const expectation = { expectedVersion: 2, expectedStatus: 'blocked', expectedResult: 'pid_mismatch' } as const;
    const refusalOf = async (promise: Promise<unknown>, runId: string): Promise<{ code: string; message: string }> => {
      const error = (await t.throwsAsync(promise)) as PidfenceError;
      return { code: error.code, message: error.message.replace(runId, 'RUN') };
    };
    const foreignRun = await world.runStore.getRun(foreign.runId);
    const answers = [
      [await refusalOf(plane.inspect(foreign.runId), foreign.runId), await refusalOf(plane.inspect(missing), missing)],
      [
        await refusalOf(plane.rearm(foreign.runId, expectation), foreign.runId),
        await refusalOf(plane.rearm(missing, expectation), missing),
      ],
      [await refusalOf(plane.showRun(foreign.runId), foreign.runId), await refusalOf(plane.showRun(missing), missing)],
      [
        await refusalOf(
          authorizeCancel(world.management, { subject: stranger }, foreign.runId, foreignRun),
          foreign.runId,
        ),
        await refusalOf(authorizeCancel(world.management, { subject: stranger }, missing, null), missing),
      ],
    ];
    for (const [forForeign, forMissing] of answers) {
      t.deepEqual(forForeign, forMissing);
      t.is(forForeign?.code, 'ERR_PIDFENCE_RUN_NOT_FOUND');
      t.false(forForeign?.message.includes(PROJECT), 'the refusal names no project');
    }
  });

  test(`cancel is authorized by run.stop on the run's project: run.read alone is refused by name, run.stop passes [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const operator = uniqueId('operator');
    await grant(world, viewer, PROJECT, 'run.read');
    await grant(world, operator, PROJECT, 'run.read', 'run.stop');
    const run = await settledRun(world, PROJECT, 'pid_mismatch');
    const record = await world.runStore.getRun(run.runId);
    await refused(
      t,
      authorizeCancel(world.management, { subject: viewer }, run.runId, record),
      'ERR_PIDFENCE_NOT_PERMITTED',
    );
    await t.notThrowsAsync(authorizeCancel(world.management, { subject: operator }, run.runId, record));
  });

  test(`gate 15: an injected failure of the audit insert rolls back the rearm and its event; without it the same rearm succeeds [${name}]`, async (t) => {
    const world = await withWorld(t);
    const operator = uniqueId('operator');
    await grant(world, operator, PROJECT, 'run.read', 'run.stop');
    const blocked = await settledRun(world, PROJECT, 'unsupported');
    const before = await writtenState(world, blocked.runId);
    const expectation = { expectedVersion: 2, expectedStatus: 'blocked', expectedResult: 'unsupported' } as const;
    const remove = await world.injectAuditFailure(operator);
    try {
      await refused(t, planeFor(world, operator).rearm(blocked.runId, expectation), 'ERR_PIDFENCE_STORE_FAILED');
    } finally {
      await remove();
    }
    t.is(await writtenState(world, blocked.runId), before, 'no dispatch change, no event, no audit row');
    t.like(await planeFor(world, operator).rearm(blocked.runId, expectation), { status: 'retry_wait' });
    t.is((await world.auditRows(blocked.runId)).length, 1);
  });

  test(`list and show carry a run's name as it was given (docs/decisions/0251) [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    const runId = uniqueId('run');
    await world.runStore.createRun({ runId, projectId: project, name: 'backup.nightly@db-1' });
    const plane = planeFor(world, viewer);
    t.like((await plane.listRuns({ projectId: project })).items, [{ runId, name: 'backup.nightly@db-1' }]);
    t.like(await plane.showRun(runId), { runId, name: 'backup.nightly@db-1' });
    await t.throwsAsync(
      () => world.runStore.createRun({ runId: uniqueId('run'), projectId: project, name: 'not a name' }),
      { code: 'ERR_PIDFENCE_INVALID_RUN_NAME' },
    );
    t.is((await plane.listRuns({ projectId: project })).items.length, 1, 'the refused one was not stored');
  });

  test(`list: a project's runs newest first with state, start, end, exit and reason, paged by cursor, filtered by state, behind run.read [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    const project = uniqueId('proj');
    await grant(world, viewer, project, 'run.read');
    // Oldest first; each created a few milliseconds after the last, so the order is the creation order.
    const created: string[] = [];
    for (const [state, exitCode] of [
      ['succeeded', 0],
      ['failed', 3],
      ['cancelled', 0],
      ['running', 0],
      ['queued', 0],
    ] as const) {
      created.push(await runIn(world, project, state, exitCode));
      await world.advanceTime(5);
    }
    await runIn(world, OTHER_PROJECT, 'failed', 9);
    const [succeeded, failed, cancelled, running, queued] = created as [string, string, string, string, string];
    const plane = planeFor(world, viewer);
    const page = await plane.listRuns({ projectId: project });
    t.deepEqual(
      page.items.map((item) => item.runId),
      [queued, running, cancelled, failed, succeeded],
    );
    t.like(page, { projectId: project, state: null, next: null });
    const byId = new Map(page.items.map((item) => [item.runId, item]));
    t.like(byId.get(failed), {
      status: 'failed',
      cancelReason: null,
      exit: { cause: 'receipt', exitCode: 3, signal: null },
    });
    t.like(byId.get(succeeded), { status: 'succeeded', exit: { cause: 'receipt', exitCode: 0, signal: null } });
    t.like(byId.get(cancelled), {
      status: 'cancelled',
      cancelReason: 'user',
      exit: { cause: 'stopped', exitCode: null, signal: null },
    });
    t.like(byId.get(running), { status: 'running', endedAtMs: null, exit: null, containment: 'group' });
    t.like(byId.get(queued), { status: 'queued', startedAtMs: null, endedAtMs: null, exit: null, containment: null });
    for (const item of page.items) {
      t.deepEqual(Object.keys(item).sort(), [
        'cancelReason',
        'containment',
        'createdAtMs',
        'endedAtMs',
        'exit',
        'name',
        'runId',
        'startedAtMs',
        'status',
      ]);
      t.is(item.name, null, 'none was given');
      if (item.endedAtMs !== null)
        t.true(
          item.endedAtMs >= (item.startedAtMs ?? Infinity) && (item.startedAtMs ?? 0) >= item.createdAtMs,
          item.runId,
        );
    }
    assertNoSecrets(t, page);

    // Pages of two: every run exactly once, in order, and the last page says so.
    const walked: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const next: Awaited<ReturnType<typeof plane.listRuns>> = await plane.listRuns({
        projectId: project,
        limit: 2,
        ...(cursor === undefined ? {} : { cursor }),
      });
      walked.push(...next.items.map((item) => item.runId));
      cursor = next.next ?? undefined;
      pages += 1;
    } while (cursor !== undefined);
    t.deepEqual(
      walked,
      page.items.map((item) => item.runId),
    );
    t.is(pages, 3);

    t.deepEqual(
      (await plane.listRuns({ projectId: project, state: 'failed' })).items.map((item) => item.runId),
      [failed],
    );
    t.deepEqual(
      (await plane.listRuns({ projectId: project, state: 'running' })).items.map((item) => item.runId),
      [running],
    );
    t.deepEqual((await plane.listRuns({ projectId: project, state: 'timed_out' })).items, []);
    // A state walk keeps its state through the cursor.
    const firstEnded = await plane.listRuns({ projectId: project, state: 'succeeded', limit: 1 });
    t.deepEqual(
      firstEnded.items.map((item) => item.runId),
      [succeeded],
    );
    t.is(firstEnded.next, null);
    const twoOfAll = await plane.listRuns({ projectId: project, limit: 2 });
    await refused(
      t,
      plane.listRuns({ projectId: OTHER_PROJECT, cursor: twoOfAll.next ?? '' }),
      'ERR_PIDFENCE_CURSOR_PROJECT',
    );
    await refused(
      t,
      plane.listRuns({ projectId: project, state: 'failed', cursor: twoOfAll.next ?? '' }),
      'ERR_PIDFENCE_CURSOR_FILTER',
    );
    await refused(t, plane.listRuns({ projectId: project, cursor: 'rl1.garbage' }), 'ERR_PIDFENCE_INVALID_CURSOR');
    await t.throwsAsync(plane.listRuns({ projectId: project, limit: 101 }), {
      code: 'ERR_PIDFENCE_INVALID_PAGE_LIMIT',
    });
    await t.throwsAsync(plane.listRuns({ projectId: project, state: 'done' as never }), {
      code: 'ERR_PIDFENCE_INVALID_RUN_STATUS',
    });
    await refused(
      t,
      planeFor(world, uniqueId('nobody')).listRuns({ projectId: project }),
      'ERR_PIDFENCE_NOT_PERMITTED',
    );
    await refused(t, plane.listRuns({ projectId: OTHER_PROJECT }), 'ERR_PIDFENCE_NOT_PERMITTED');
  });

  test(`show: one run with its attempts, events, dispatch and exit, and never a pid, handle, runner or lease owner [${name}]`, async (t) => {
    const world = await withWorld(t);
    const viewer = uniqueId('viewer');
    await grant(world, viewer, PROJECT, 'run.read');
    const plane = planeFor(world, viewer);
    // A stop claimed by OWNER and settled, then the job's receipt: exit by SIGTERM.
    const stopped = await settledRun(world, PROJECT, 'termination_requested');
    const attemptId = `${stopped.runId}-a1`;
    const ended = await world.executionStore.completeAttempt({
      runId: stopped.runId,
      attemptId,
      status: 'cancelled',
      cause: 'receipt',
      exit: { exitCode: null, signal: 'SIGTERM' },
      attemptEventId: uniqueId('evt'),
      runEventId: uniqueId('evt'),
      journalReceipt: false,
    });
    t.is(ended.kind, 'completed');
    const run = await plane.showRun(stopped.runId);
    t.like(run, {
      runId: stopped.runId,
      projectId: PROJECT,
      status: 'cancelled',
      cancelReason: 'user',
      exit: { cause: 'receipt', exitCode: null, signal: 'SIGTERM' },
      attemptsTruncated: false,
      eventsTruncated: false,
    });
    t.true(typeof run.cancelRequestedAtMs === 'number' && typeof run.endedAtMs === 'number');
    t.is(run.attempts.length, 1);
    t.like(run.attempts[0], { attemptId, status: 'cancelled', exit: { cause: 'receipt', signal: 'SIGTERM' } });
    t.deepEqual(
      run.attempts[0]?.events.map((event) => event.type),
      ['attempt.terminal'],
    );
    t.deepEqual(
      run.events.map((event) => event.type),
      ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal'],
    );
    t.deepEqual(
      run.events.map((event) => event.seq),
      [1, 2, 3],
    );
    t.deepEqual(run.events[0]?.detail, { reason: 'user' });
    t.deepEqual(run.events[1]?.detail, { attemptId, result: 'termination_requested', dispatchCount: 1 });
    t.like(run.dispatch, {
      runId: stopped.runId,
      status: 'dispatched',
      lastResult: 'termination_requested',
      dispatchCount: 1,
    });
    assertNoSecrets(t, run, stopped.token, leaseTokenDigest(stopped.token));

    // A queued run: no attempt, no event, no dispatch; a running one has no exit yet.
    const queued = await plane.showRun(await runIn(world, PROJECT, 'queued'));
    t.like(queued, {
      status: 'queued',
      startedAtMs: null,
      endedAtMs: null,
      exit: null,
      attempts: [],
      events: [],
      dispatch: null,
    });
    const running = await plane.showRun(await runIn(world, PROJECT, 'running'));
    t.like(running, { status: 'running', exit: null, dispatch: null });
    t.like(running.attempts[0], { status: 'running', exit: null, events: [] });
    assertNoSecrets(t, [queued, running]);
    await refused(t, planeFor(world, uniqueId('nobody')).showRun(stopped.runId), 'ERR_PIDFENCE_RUN_NOT_FOUND');
  });
}
