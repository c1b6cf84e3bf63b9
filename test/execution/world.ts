// Building blocks of the execution tests: a real SQLite file with its receipt directory, the
// execution application over it, and waits that end on a fact (a completion, a file) with a bound.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import {
  createExecution,
  type CompletionOutcome,
  type ExecutionApplication,
  type ExecutionOptions,
  type ExecutionStores,
} from '../../lib/execution/index';
import { handleExpectedIdentity, parseHandle } from '../../lib/process/index';
import { signalVerified } from '../../lib/native/index';
import type { RunStore } from '../../lib/store/run-store';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';

/** Short enough for tests; the lease derived from it outlasts the controller's bound. */
export const TEST_GRACE_MS = 300;

export interface World {
  readonly dir: string;
  readonly file: string;
  readonly receipts: string;
  readonly store: SqliteStore;
  readonly app: ExecutionApplication;
  readonly completions: Array<{ runId: string; outcome: CompletionOutcome }>;
  /** Resolves with the completion of `runId`, or rejects after `timeoutMs`. */
  completed(runId: string, timeoutMs?: number): Promise<CompletionOutcome>;
}

export function worldDirectory(t: ExecutionContext): { dir: string; file: string; receipts: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-exec-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, file: path.join(dir, 'pidfence.db'), receipts: path.join(dir, 'receipts') };
}

export type WorldOptions = Partial<ExecutionOptions>;

/** The execution application over `stores`, with its completions recorded and awaitable. */
export function worldOver(
  t: ExecutionContext,
  stores: ExecutionStores,
  receipts: string,
  options: WorldOptions = {},
): Pick<World, 'app' | 'completions' | 'completed'> {
  const completions: Array<{ runId: string; outcome: CompletionOutcome }> = [];
  const waiters = new Set<() => void>();
  const app = createExecution({
    stores,
    receiptDirectory: receipts,
    graceMs: options.graceMs ?? TEST_GRACE_MS,
    drainTimeoutMs: options.drainTimeoutMs ?? 10_000,
    ...(options.profile === undefined ? {} : { profile: options.profile }),
    ...(options.observer === undefined ? {} : { observer: options.observer }),
    ...(options.wakeDirectory === undefined ? {} : { wakeDirectory: options.wakeDirectory }),
    ...(options.onWakeRefused === undefined ? {} : { onWakeRefused: options.onWakeRefused }),
    ...(options.onCycle === undefined ? {} : { onCycle: options.onCycle }),
    ...(options.onStopped === undefined ? {} : { onStopped: options.onStopped }),
    ...(options.runnerKind === undefined ? {} : { runnerKind: options.runnerKind }),
    ...(options.logs === undefined ? {} : { logs: options.logs }),
    ...(options.diagnostics === undefined ? {} : { diagnostics: options.diagnostics }),
    onCompleted: (ref, outcome) => {
      completions.push({ runId: ref.runId, outcome });
      for (const wake of [...waiters]) wake();
      options.onCompleted?.(ref, outcome);
    },
  });
  t.teardown(async () => {
    await app.drain();
  });
  return {
    app,
    completions,
    completed(runId, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`run did not complete within ${timeoutMs} ms`));
        }, timeoutMs);
        const check = () => {
          const found = completions.find((c) => c.runId === runId);
          if (found !== undefined) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(found.outcome);
          }
        };
        waiters.add(check);
        check();
      });
    },
  };
}

export function openWorld(
  t: ExecutionContext,
  options: WorldOptions & {
    readonly at?: { dir: string; file: string; receipts: string };
    readonly wrap?: (store: SqliteStore) => Partial<ExecutionStores>;
  } = {},
): World {
  const at = options.at ?? worldDirectory(t);
  const store = openSqliteStore(at.file);
  const stores = {
    runStore: store.runStore,
    repository: store.dispatchRepository,
    executionStore: store.executionStore,
    runnerStore: store.runnerStore,
    close: () => store.close(),
    ...(options.wrap?.(store) ?? {}),
  };
  return { ...at, store, ...worldOver(t, stores, at.receipts, options) };
}

/** Whether the process a stored handle names still runs (a signal-0 proof, never a bare PID). */
export function handleAlive(handle: string): boolean {
  return signalVerified(handleExpectedIdentity(parseHandle(handle)), 0, { group: false }).kind === 'signalled';
}

export function receiptExists(receipts: string, attemptId: string): boolean {
  return existsSync(path.join(receipts, `${attemptId}.receipt`));
}

/** `target` with some methods replaced; the others stay bound to it (private fields keep working). */
export function overriding<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(object, key) {
      if (Object.prototype.hasOwnProperty.call(overrides, key))
        return (overrides as Record<string | symbol, unknown>)[key];
      const value = Reflect.get(object, key, object) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}

/** `target` whose `method` fails as a full disk does (SQLITE_IOERR) while `failing(command)` holds. */
export function diskErrorWhile<T extends object>(
  target: T,
  method: keyof T & string,
  failing: (command: never) => boolean,
): T {
  const real = (target[method] as unknown as (command: unknown) => Promise<unknown>).bind(target);
  const failingMethod = async (command: never): Promise<unknown> => {
    if (failing(command)) throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
    return real(command);
  };
  return overriding(target, { [method]: failingMethod } as unknown as Partial<T>);
}

/**
 * Lifecycle gate 4 on any store: a cancelled and a TERM-ignoring job, then the drain. The caller's
 * close wrapper pushes the count of active attempts it saw onto `activeAtClose`; `reopen` opens
 * the store again (after the drain closed it) to read what was committed.
 */
export async function shutdownDrainGate(
  t: ExecutionContext,
  world: { readonly app: ExecutionApplication; readonly runStore: RunStore },
  activeAtClose: readonly number[],
  reopen: () => Promise<RunStore>,
): Promise<void> {
  world.app.start();
  const user = await world.app.admit({ projectId: 'p1', command: 'sleep', args: ['30'] });
  const plain = await world.app.admit({
    projectId: 'p1',
    command: 'sh',
    args: ['-c', 'trap "" TERM; sleep 30 & wait; sleep 30'],
  });
  if (user.kind !== 'admitted' || plain.kind !== 'admitted') throw new Error('not admitted');
  const userHandle = (await world.runStore.getAttempt(user.runId, user.attemptId))?.handle ?? '';
  const plainHandle = (await world.runStore.getAttempt(plain.runId, plain.attemptId))?.handle ?? '';
  await world.runStore.requestCancellation({ runId: user.runId, reason: 'user', eventId: `evt-${user.runId}-user` });
  const report = await world.app.drain();
  // The started lifecycle may have stopped the user-cancelled job already (its cancel wakes it); the
  // TERM-ignoring one is the drain's in every interleaving.
  t.like(report, { kind: 'drained', shutdownRequested: 1, remaining: 0 });
  t.true(
    report.kind === 'drained' && (report.active === 2 || report.active === 1) && report.converged === report.active,
    JSON.stringify(report),
  );
  t.deepEqual(activeAtClose, [0], 'no active attempt when storage closed');
  t.false(handleAlive(userHandle));
  t.false(handleAlive(plainHandle));
  t.is(await world.app.drain(), report, 'idempotent');
  t.is(activeAtClose.length, 1, 'storage closed once');
  t.deepEqual(await world.app.admit({ projectId: 'p1', command: 'true' }), { kind: 'refused', reason: 'closed' });
  const reopened = await reopen();
  t.like(await reopened.getRun(user.runId), { cancelReason: 'user', status: 'cancelled' });
  t.like(await reopened.getRun(plain.runId), { cancelReason: 'shutdown', status: 'cancelled' });
  t.like((await reopened.listEvents(plain.runId))[0], {
    type: 'run.cancel_requested',
    payload: { reason: 'shutdown' },
  });
}
