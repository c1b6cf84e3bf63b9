// The rule table of the dispatch (issue 31 item 2, docs/decisions/0231; design/dispatch §2.2, §2.4, §5.1):
// every dispatch state × command (claim, claimPage, recordResult and recordResults with each result
// class, rearm) × fence case (own, another or stale owner, stale token, stale version, stale result,
// expired lease or due retry), through the public repositories of both stores. Each store must answer
// the table below, and both must leave the same trace: the rules are written once per dialect
// (TypeScript for SQLite, plpgsql for PostgreSQL) and proven equal here.
import test, { type ExecutionContext } from 'ava';

import {
  createLeaseToken,
  leaseTokenDigest,
  type BlockingResult,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type DispatchResult,
  type DispatchStatus,
  type RecordResultCommand,
} from '../../lib/contract/index';
import { cancelledRun, type CancelledRun } from '../helpers/cancelled-runs';
import { storeFactory, type TestStore } from '../helpers/stores';
import { uniqueId } from '../helpers/unique-id';

const PROJECT = 'rules';
const OPERATOR = 'operator';
/** A lease or retry that the table's clock step never reaches, and one it always passes. */
const LONG_MS = 600_000;
const SHORT_MS = 1_000;
const CLOCK_STEP_MS = 5_000;
const RETRY_MS = 30_000;
const CONCURRENT_CASES = 8;

const STATES = [
  'pending',
  'leased',
  'retry_wait',
  'dispatched',
  'blocked',
] as const satisfies readonly DispatchStatus[];
type State = (typeof STATES)[number];

type Fence = 'own' | 'other owner' | 'stale owner' | 'stale token' | 'stale version' | 'stale result' | 'expired';

/** One result of each class of the design/dispatch §2.4 table. */
const RESULT_CLASSES: Readonly<Record<string, DispatchResult>> = {
  dispatched: 'termination_requested',
  blocked: 'identity_mismatch',
  retry: 'dispatch_error',
};

type Family = 'claim' | 'settle' | 'rearm';
interface Command {
  readonly name: string;
  readonly family: Family;
  readonly fences: readonly Fence[];
  readonly result?: DispatchResult;
}

const CLAIM_FENCES: readonly Fence[] = ['own', 'other owner', 'expired'];
const SETTLE_FENCES: readonly Fence[] = ['own', 'stale owner', 'stale token', 'stale version', 'expired'];
const COMMANDS: readonly Command[] = [
  { name: 'claim', family: 'claim', fences: CLAIM_FENCES },
  { name: 'claimPage', family: 'claim', fences: CLAIM_FENCES },
  ...Object.entries(RESULT_CLASSES).flatMap(([kind, result]) => [
    { name: `recordResult(${kind})`, family: 'settle' as const, fences: SETTLE_FENCES, result },
    { name: `recordResults(${kind})`, family: 'settle' as const, fences: SETTLE_FENCES, result },
  ]),
  { name: 'rearm', family: 'rearm', fences: ['own', 'stale version', 'stale result', 'expired'] },
];

const SETTLE_REFUSED: Partial<Record<Fence, string>> = {
  own: 'stale_fence',
  'stale owner': 'stale_fence',
  'stale token': 'stale_fence',
  'stale version': 'stale_fence',
  expired: 'stale_fence',
};
const NOT_BLOCKED: Partial<Record<Fence, string>> = {
  own: 'not_blocked',
  'stale version': 'stale_version',
  'stale result': 'not_blocked',
  expired: 'not_blocked',
};

/**
 * The table. `own` is the fence of the state's last claim (a pending record was never claimed: then
 * the version its first claim would have and a token nobody holds); `expired` is `own` after the lease or the retry
 * delay ran out; a claim's `own` is the last claim's owner asking again.
 */
/** A claim's row of the table: what the last owner, another owner and anyone after the expiry get. */
const claims = (own: string, other: string, expired: string): Partial<Record<Fence, string>> => ({
  own,
  'other owner': other,
  expired,
});

const EXPECTED: Readonly<Record<State, Readonly<Record<Family, Partial<Record<Fence, string>>>>>> = {
  pending: { claim: claims('claimed', 'claimed', 'claimed'), settle: SETTLE_REFUSED, rearm: NOT_BLOCKED },
  leased: {
    claim: claims('leased', 'leased', 'claimed'),
    // Expiry is not part of the fence: a late result of the last owner stands until someone else claims.
    settle: { ...SETTLE_REFUSED, own: 'recorded', expired: 'recorded' },
    rearm: NOT_BLOCKED,
  },
  retry_wait: { claim: claims('not_due', 'not_due', 'claimed'), settle: SETTLE_REFUSED, rearm: NOT_BLOCKED },
  dispatched: { claim: claims('dispatched', 'dispatched', 'dispatched'), settle: SETTLE_REFUSED, rearm: NOT_BLOCKED },
  blocked: {
    claim: claims('blocked', 'blocked', 'blocked'),
    settle: SETTLE_REFUSED,
    rearm: { own: 'rearmed', 'stale version': 'stale_version', 'stale result': 'result_mismatch', expired: 'rearmed' },
  },
};

interface Case {
  readonly state: State;
  readonly command: Command;
  readonly fence: Fence;
}

const CASES: readonly Case[] = STATES.flatMap((state) =>
  COMMANDS.flatMap((command) => command.fences.map((fence) => ({ state, command, fence }))),
);

interface Snapshot {
  readonly run: unknown;
  readonly runVersion: number;
  readonly record: CancellationDispatchRecord | null;
  readonly events: ReadonlyArray<{ readonly type: string; readonly payload: unknown }>;
}

interface CaseResult {
  readonly kind: string;
  readonly run: CancelledRun;
  /** The token the command presented, if any (a claim's new token, a settle's fence token). */
  readonly token: string | null;
  readonly before: Snapshot;
  readonly after: Snapshot;
}

interface Prepared {
  readonly run: CancelledRun;
  /** The state's last claim, or null for a pending record. */
  readonly lastClaim: { readonly command: ClaimCommand; readonly version: number } | null;
}

async function snapshotOf(store: TestStore, runId: string): Promise<Snapshot> {
  const run = await store.runStore.getRun(runId);
  const events = await store.runStore.listEvents(runId);
  return {
    run,
    runVersion: run?.version ?? -1,
    record: await store.repository.getRecord(runId),
    events: events.map(({ type, payload }) => ({ type, payload })),
  };
}

function claimOf(run: CancelledRun, owner: string, leaseDurationMs: number): ClaimCommand {
  return {
    runId: run.runId,
    attemptId: run.attemptId,
    cancelRequestedAtMs: run.cancelRequestedAtMs,
    owner,
    token: createLeaseToken(),
    leaseDurationMs,
  };
}

async function claimed(store: TestStore, command: ClaimCommand): Promise<number> {
  const outcome = await store.repository.claim(command);
  if (outcome.kind !== 'claimed') throw new Error(`fixture: claim was ${outcome.kind}`);
  return outcome.record.version;
}

async function settled(
  store: TestStore,
  command: ClaimCommand,
  version: number,
  result: DispatchResult,
  retryDelayMs?: number,
): Promise<void> {
  const outcome = await store.repository.recordResult({
    runId: command.runId,
    attemptId: command.attemptId,
    owner: command.owner,
    token: command.token,
    expectedVersion: version,
    result,
    eventId: uniqueId('evt'),
    ...(retryDelayMs === undefined ? {} : { retryDelayMs }),
  });
  if (outcome.kind !== 'recorded') throw new Error(`fixture: settle was ${outcome.kind}`);
}

/** A run whose dispatch is in `state`; with `expiring`, its lease or retry runs out at the clock step. */
async function prepare(store: TestStore, state: State, expiring: boolean): Promise<Prepared> {
  const run = await cancelledRun(store.runStore, { projectId: PROJECT });
  if (state === 'pending') return { run, lastClaim: null };
  const command = claimOf(run, 'worker-own', state === 'leased' && expiring ? SHORT_MS : LONG_MS);
  const version = await claimed(store, command);
  if (state === 'retry_wait') await settled(store, command, version, 'dispatch_error', expiring ? SHORT_MS : LONG_MS);
  if (state === 'dispatched') await settled(store, command, version, 'termination_requested');
  if (state === 'blocked') await settled(store, command, version, 'identity_mismatch');
  return { run, lastClaim: { command, version } };
}

function settleCommand(c: Case, prepared: Prepared, before: Snapshot): RecordResultCommand {
  const { run, lastClaim } = prepared;
  const own =
    lastClaim === null
      ? // A lease nobody holds: the version its claim would have had.
        { owner: 'worker-own', token: createLeaseToken(), expectedVersion: (before.record?.version ?? 0) + 1 }
      : { owner: lastClaim.command.owner, token: lastClaim.command.token, expectedVersion: lastClaim.version };
  const fence =
    c.fence === 'stale owner'
      ? { ...own, owner: 'worker-stale' }
      : c.fence === 'stale token'
        ? { ...own, token: createLeaseToken() }
        : c.fence === 'stale version'
          ? { ...own, expectedVersion: own.expectedVersion + 1 }
          : own;
  const result = c.command.result ?? 'dispatch_error';
  return {
    runId: run.runId,
    attemptId: run.attemptId,
    ...fence,
    result,
    eventId: uniqueId('evt'),
    ...(result === 'dispatch_error' ? { retryDelayMs: RETRY_MS } : {}),
  };
}

/** Runs one case's command; answers its outcome kind and the token it presented. */
async function commandRun(
  store: TestStore,
  c: Case,
  prepared: Prepared,
  before: Snapshot,
): Promise<{ kind: string; token: string | null }> {
  const { run } = prepared;
  if (c.command.family === 'claim') {
    const command = claimOf(run, c.fence === 'own' ? 'worker-own' : 'worker-other', LONG_MS);
    const outcome =
      c.command.name === 'claim'
        ? await store.repository.claim(command)
        : (
            await store.repository.claimPage({
              owner: command.owner,
              leaseDurationMs: command.leaseDurationMs,
              items: [command],
            })
          )[0];
    return { kind: outcome?.kind ?? 'none', token: command.token };
  }
  if (c.command.family === 'settle') {
    const command = settleCommand(c, prepared, before);
    const outcome = c.command.name.startsWith('recordResults')
      ? (await store.repository.recordResults([command]))[0]
      : await store.repository.recordResult(command);
    return { kind: outcome?.kind ?? 'none', token: command.token };
  }
  const version = before.record?.version ?? 0;
  // The blocked state's result; the other states have no blocking result to expect.
  const own: BlockingResult = 'identity_mismatch';
  const outcome = await store.managementStore.rearm({
    runId: run.runId,
    subject: OPERATOR,
    eventId: uniqueId('evt'),
    auditId: uniqueId('audit'),
    expectedVersion: c.fence === 'stale version' ? version + 1 : version,
    expectedResult: c.fence === 'stale result' ? 'unsupported' : own,
  });
  return { kind: outcome.kind, token: null };
}

/**
 * `work` on every item, `size` at a time. Between batches it yields to the event loop: the SQLite
 * store answers synchronously, so without a turn of the loop a table would hold off every timer and
 * socket of this process until it ends.
 */
async function inBatches<T, R>(items: readonly T[], size: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let at = 0; at < items.length; at += size) {
    results.push(...(await Promise.all(items.slice(at, at + size).map(work))));
    await new Promise((resolve) => setImmediate(resolve));
  }
  return results;
}

/** The whole table on one store: every case prepared, one clock step, every command. */
async function tableOn(storeName: string): Promise<Map<Case, CaseResult>> {
  const store = await storeFactory(storeName).open();
  try {
    await store.grant(OPERATOR, PROJECT, 'run.stop');
    const prepared = await inBatches(CASES, CONCURRENT_CASES, (c) => prepare(store, c.state, c.fence === 'expired'));
    await store.advanceTime(CLOCK_STEP_MS);
    const results = await inBatches(
      CASES.map((c, i) => [c, prepared[i] as Prepared] as const),
      CONCURRENT_CASES,
      async ([c, p]) => {
        const before = await snapshotOf(store, p.run.runId);
        const { kind, token } = await commandRun(store, c, p, before);
        return { kind, run: p.run, token, before, after: await snapshotOf(store, p.run.runId) };
      },
    );
    return new Map(CASES.map((c, i) => [c, results[i] as CaseResult]));
  } finally {
    await store.close();
  }
}

// One table at a time: the PostgreSQL store's connects and the SQLite store's synchronous work stay apart.
const tables: Record<string, Promise<Map<Case, CaseResult>>> = {};
const tableOf = (storeName: string): Promise<Map<Case, CaseResult>> => {
  const sqlite = (tables['sqlite'] ??= tableOn('sqlite'));
  if (storeName === 'sqlite') return sqlite;
  return (tables[storeName] ??= sqlite.catch(() => undefined).then(() => tableOn(storeName)));
};

/** A time as the trace compares it: relative to the record's last write. */
function relativeTo(updatedAtMs: number, ms: number | null): number | null {
  return ms === null ? null : ms - updatedAtMs;
}

/** What the two stores must agree on: no absolute time, id or digest, only what the rules decided. */
function traceOf(result: CaseResult): unknown {
  const record = result.after.record;
  const at = record?.updatedAtMs ?? 0;
  return {
    kind: result.kind,
    unchanged: JSON.stringify(result.before) === JSON.stringify(result.after),
    record:
      record === null
        ? null
        : {
            status: record.status,
            version: record.version,
            dispatchCount: record.dispatchCount,
            leaseOwner: record.leaseOwner,
            digest:
              record.leaseTokenDigest === null
                ? null
                : record.leaseTokenDigest === leaseTokenDigest(result.token ?? '')
                  ? "this command's"
                  : 'another',
            leaseExpiresAtMs: relativeTo(at, record.leaseExpiresAtMs),
            nextAttemptAtMs: relativeTo(at, record.nextAttemptAtMs),
            // The claim's time, before the settle by however long the fixture took: only whether it is set.
            lastResult: record.lastResult,
            lastDispatchedAtMs: record.lastDispatchedAtMs === null ? null : 'set',
            blockedAtMs: relativeTo(at, record.blockedAtMs),
          },
    newEvents: result.after.events.slice(result.before.events.length).map((event) => ({
      type: event.type,
      payload: JSON.stringify(event.payload).replace(result.run.attemptId, '<attempt>'),
    })),
    runVersionDelta: result.after.runVersion - result.before.runVersion,
  };
}

/** What every outcome must have written, or that nothing was written at all. */
function checkWrites(t: ExecutionContext, label: string, c: Case, result: CaseResult): void {
  const { before, after } = result;
  const record = after.record;
  const newEvents = after.events.slice(before.events.length);
  if (!['claimed', 'recorded', 'rearmed'].includes(result.kind)) {
    t.deepEqual(after, before, `${label}: a refusal changes nothing`);
    return;
  }
  if (record === null || before.record === null) return void t.fail(`${label}: no record`);
  t.is(record.version, before.record.version + 1, `${label}: the version moves by one`);
  if (result.kind === 'claimed') {
    t.like(
      record,
      {
        status: 'leased',
        dispatchCount: before.record.dispatchCount + 1,
        leaseTokenDigest: leaseTokenDigest(result.token ?? ''),
        nextAttemptAtMs: null,
      },
      label,
    );
    t.is(record.leaseExpiresAtMs, record.updatedAtMs + LONG_MS, `${label}: expiry from the store's clock`);
    t.deepEqual([newEvents.length, after.runVersion], [0, before.runVersion], `${label}: a claim appends no event`);
    return;
  }
  t.deepEqual(
    [record.leaseOwner, record.leaseTokenDigest, record.leaseExpiresAtMs],
    [null, null, null],
    `${label}: the lease is cleared`,
  );
  t.is(after.runVersion, before.runVersion + 1, `${label}: the run version reserves the event`);
  t.is(newEvents.length, 1, `${label}: one event`);
  if (result.kind === 'rearmed') {
    t.like(record, { status: 'retry_wait', nextAttemptAtMs: record.updatedAtMs, blockedAtMs: null }, label);
    t.is(newEvents[0]?.type, 'run.cancel_dispatch_rearmed', label);
    return;
  }
  const expected = {
    dispatched: ['dispatched', 'run.cancel_dispatched'],
    blocked: ['blocked', 'run.cancel_dispatch_blocked'],
    retry: ['retry_wait', 'run.cancel_dispatch_failed'],
  };
  const [status, eventType] =
    expected[
      (Object.entries(RESULT_CLASSES).find(([, r]) => r === c.command.result)?.[0] ?? 'retry') as keyof typeof expected
    ];
  t.like(
    record,
    {
      status,
      lastResult: c.command.result,
      dispatchCount: before.record.dispatchCount,
      nextAttemptAtMs: status === 'retry_wait' ? record.updatedAtMs + RETRY_MS : null,
      blockedAtMs: status === 'blocked' ? record.updatedAtMs : null,
    },
    label,
  );
  t.like(
    newEvents[0],
    {
      type: eventType,
      payload: { attemptId: result.run.attemptId, dispatchCount: record.dispatchCount, result: c.command.result },
    },
    label,
  );
}

for (const storeName of ['sqlite', 'postgres']) {
  for (const state of STATES) {
    for (const command of COMMANDS) {
      test(`rule table: ${state} × ${command.name} × ${command.fences.join(', ')} [${storeName}]`, async (t) => {
        const table = await tableOf(storeName);
        for (const c of CASES.filter((x) => x.state === state && x.command === command)) {
          const result = table.get(c) as CaseResult;
          const label = `${state} × ${command.name} × ${c.fence}`;
          t.is(result.kind, EXPECTED[state][command.family][c.fence] ?? 'missing from the table', label);
          checkWrites(t, label, c, result);
        }
      });
    }
  }
}

test('rule table: SQLite and PostgreSQL leave the same trace in every case', async (t) => {
  const [sqlite, postgres] = await Promise.all([tableOf('sqlite'), tableOf('postgres')]);
  t.is(CASES.length, 200);
  const differing = CASES.filter(
    (c) =>
      JSON.stringify(traceOf(sqlite.get(c) as CaseResult)) !== JSON.stringify(traceOf(postgres.get(c) as CaseResult)),
  );
  t.deepEqual(
    differing.map((c) => `${c.state} × ${c.command.name} × ${c.fence}`),
    [],
  );
  t.deepEqual(
    CASES.map((c) => traceOf(sqlite.get(c) as CaseResult)),
    CASES.map((c) => traceOf(postgres.get(c) as CaseResult)),
  );
});
