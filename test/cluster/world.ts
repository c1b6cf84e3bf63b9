// A cluster world on one migrated PostgreSQL database (docs/decisions/0100, 0101): the lease store
// and a replica's cancellation wrapper, both as the runtime role, plus owner-side helpers; the
// database on the shared test server or on a throw-away cluster.
import { randomUUID } from 'node:crypto';

import { Pool } from 'pg';

import {
  CancellationDispatchControl,
  ClusterLeaseStore,
  DispatchAvailability,
  type Assignment,
  type DispatchObservation,
  type LeaseRef,
  type WorkerCaller,
} from '../../lib/cluster/index';
import { PostgresExecutionStore, PostgresRunStore, type DispatchRepository } from '../../lib/store/postgres/index';
import test from 'ava';

import { createLeaseToken, type DispatchResult } from '../../lib/contract/index';
import { clusterRemove, clusterUrl, type PgCluster } from '../helpers/pg-cluster';
import { migratedDatabase, type MigratedDatabase } from '../helpers/pg-store';

export const LEASE_MS = 5_000;

export interface Replica {
  readonly control: CancellationDispatchControl;
  readonly availability: DispatchAvailability;
  readonly observations: DispatchObservation[];
}

export interface ClusterWorld {
  readonly pool: Pool;
  readonly leases: ClusterLeaseStore;
  readonly runStore: PostgresRunStore;
  replica(
    repository: DispatchRepository,
    options?: { readonly ownerId?: string; readonly leaseDurationMs?: number; readonly holdMs?: number },
  ): Replica;
  /** Registers a session, enqueues one job and pulls it. */
  assigned(options?: {
    readonly timeoutMs?: number;
  }): Promise<{ readonly caller: WorkerCaller; readonly ref: Assignment }>;
  /** One session of `principal` holding `count` runs of its own (pulled in pages, others' runs skipped). */
  holding(count: number, principal?: string): Promise<{ readonly caller: WorkerCaller; readonly refs: Assignment[] }>;
  cancel(runId: string): Promise<number>;
  eventTypes(runId: string): Promise<string[]>;
  close(): Promise<void>;
}

export function clusterWorld(database: MigratedDatabase, leaseMs = LEASE_MS): ClusterWorld {
  const pool = new Pool({ connectionString: database.runtimeUrl, max: 4 });
  pool.on('error', () => undefined);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: leaseMs });
  const runStore = new PostgresRunStore(pool);
  return {
    pool,
    leases,
    runStore,
    replica: (repository, options = {}) => {
      const availability = new DispatchAvailability(options.holdMs ?? 60_000);
      const observations: DispatchObservation[] = [];
      const control = new CancellationDispatchControl(leases, repository, {
        replicaOwnerId: options.ownerId ?? `cp-${randomUUID().slice(0, 8)}`,
        leaseDurationMs: options.leaseDurationMs ?? 10_000,
        availability,
        observe: (observation) => observations.push(observation),
      });
      return { control, availability, observations };
    },
    assigned: async (options = {}) => {
      const principal = 'CN=worker-a';
      const sessionId = await leases.registerSession(principal);
      const runId = `run-${randomUUID()}`;
      await leases.enqueueJob({ runId, projectId: 'project-c', argv: ['sleep', '30'], ...options });
      const caller = { principal, sessionId };
      // Other tests share the database: pull until this test's run comes out (oldest first).
      for (;;) {
        const pulled = await leases.pull(caller);
        if (pulled.kind !== 'assigned') throw new Error(`pull found ${pulled.kind}`);
        if (pulled.assignment.runId === runId) return { caller, ref: pulled.assignment };
      }
    },
    holding: async (count, principal = 'CN=worker-page') => {
      const caller = { principal, sessionId: await leases.registerSession(principal) };
      const mine = new Set<string>();
      for (let i = 0; i < count; i++) {
        const runId = `run-${randomUUID()}`;
        mine.add(runId);
        await leases.enqueueJob({ runId, projectId: 'project-c', argv: ['sleep', '30'] });
      }
      const refs: Assignment[] = [];
      while (refs.length < count) {
        const page = await leases.pullPage(caller, 64);
        if (page.kind !== 'assigned') throw new Error(`pull found ${page.kind}`);
        refs.push(...page.assignments.filter((a) => mine.has(a.runId)));
      }
      return { caller, refs };
    },
    cancel: async (runId) => {
      const outcome = await runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      if (outcome.kind !== 'requested') throw new Error(`cancel: ${outcome.kind}`);
      return outcome.run.cancelRequestedAtMs ?? 0;
    },
    eventTypes: async (runId) => (await runStore.listEvents(runId)).map((event) => event.type),
    close: () => pool.end(),
  };
}

/**
 * One migrated database and world per test file, disposed after the file's tests. With `server` (a
 * throw-away cluster being started) the database lives there, and the cluster is removed after it.
 */
export function clusterFixture(
  label: string,
  leaseMs = LEASE_MS,
  server?: Promise<PgCluster>,
): Promise<{ readonly database: MigratedDatabase; readonly world: ClusterWorld }> {
  let database: MigratedDatabase | undefined;
  let world: ClusterWorld | undefined;
  const adminUrl = server === undefined ? Promise.resolve(undefined) : server.then((cluster) => clusterUrl(cluster));
  const ready = adminUrl.then(async (url) => {
    database = await migratedDatabase(label, url);
    world = clusterWorld(database, leaseMs);
    return { database, world };
  });
  ready.catch(() => undefined);
  // One hook, in this order: AVA may run a file's after.always hooks at the same time.
  test.after.always(async () => {
    await world?.close();
    await database?.dispose();
    await server?.then(clusterRemove, () => undefined);
  });
  return ready;
}

/** Another owner claims the run's dispatch and, with `result`, settles it (retry_wait, blocked, ...). */
export async function foreignDispatch(
  repository: DispatchRepository,
  ref: LeaseRef,
  cancelledAtMs: number,
  result?: DispatchResult,
): Promise<void> {
  const token = createLeaseToken();
  const claimed = await repository.claim({
    runId: ref.runId,
    attemptId: ref.attemptId,
    cancelRequestedAtMs: cancelledAtMs,
    owner: 'cp-foreign',
    token,
    leaseDurationMs: 60_000,
  });
  if (claimed.kind !== 'claimed') throw new Error(`foreign claim: ${claimed.kind}`);
  if (result === undefined) return;
  await repository.recordResult({
    runId: ref.runId,
    attemptId: ref.attemptId,
    owner: 'cp-foreign',
    token,
    expectedVersion: claimed.record.version,
    result,
    eventId: `evt-${randomUUID()}`,
    ...(result === 'dispatch_error' ? { retryDelayMs: 60_000 } : {}),
  });
}
