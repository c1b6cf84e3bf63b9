// The lease-control wrapper across a primary → standby promotion (issue 30 item 7; docs/decisions/0274;
// the cluster side of design/dispatch §6 gate 12): a throw-away primary with a synchronous streaming
// standby; runs leased and cancelled on the primary; one stop delivered, one claimed by a replica that
// dies with the primary, one not yet ticked. After promotion (timeline 1 → 2) every stop reaches the
// worker, each settled with exactly one `run.cancel_dispatched`, and stale fences are refused.
import { randomUUID } from 'node:crypto';

import test, { type ExecutionContext } from 'ava';
import type { Pool } from 'pg';

import {
  CancellationDispatchControl,
  ClusterLeaseStore,
  DispatchAvailability,
  type LeaseRef,
  type WorkerCaller,
} from '../../lib/cluster/index';
import { createLeaseToken } from '../../lib/contract/index';
import {
  grantRuntime,
  migratePostgres,
  PostgresDispatchRepository,
  PostgresExecutionStore,
  PostgresRunStore,
} from '../../lib/store/postgres/index';
import {
  clusterInit,
  clusterPromote,
  clusterRemove,
  clusterStart,
  clusterStop,
  clusterUrl,
  standbyCreate,
  type PgCluster,
} from '../helpers/pg-cluster';
import { scalar, silentPool } from '../helpers/pg-pool';
import { provisionDatabase } from '../helpers/postgres';
import { until } from '../helpers/wait';

const STANDBY_NAME = 'pidfence_ha_wrapper_standby';
/** The workers' lease outlives the promotion: the worker keeps ticking through it. */
const WORKER_LEASE_MS = 60_000;
/** The replicas' dispatch lease. */
const DISPATCH_LEASE_MS = 3_000;
/** The dead replica's claim outlives the crash and promotion (a few seconds here), then is taken over. */
const DEAD_CLAIM_LEASE_MS = 20_000;

const clusters: PgCluster[] = [];
const pools: Pool[] = [];
test.after.always(async () => {
  for (const pool of pools) await pool.end().catch(() => undefined);
  for (const cluster of clusters.reverse()) await clusterRemove(cluster);
});

function poolOn(url: string, port: number | undefined): Pool {
  const moved = new URL(url);
  moved.port = String(port);
  const pool = silentPool(moved.toString(), { max: 4, connectionTimeoutMillis: 10_000 });
  pools.push(pool);
  return pool;
}

function replicaOn(pool: Pool, ownerId: string) {
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: WORKER_LEASE_MS });
  const control = new CancellationDispatchControl(leases, new PostgresDispatchRepository(pool), {
    replicaOwnerId: ownerId,
    leaseDurationMs: DISPATCH_LEASE_MS,
    availability: new DispatchAvailability(60_000),
  });
  return { leases, control, runStore: new PostgresRunStore(pool), repository: new PostgresDispatchRepository(pool) };
}

async function dispatchedEvents(pool: Pool, runId: string): Promise<number> {
  return scalar<number>(
    pool,
    "SELECT count(*)::int FROM run_events WHERE run_id = $1 AND type = 'run.cancel_dispatched'",
    [runId],
  );
}

async function startPair(t: ExecutionContext) {
  const primary = await clusterInit({
    label: 'haw-primary',
    settings: { wal_level: 'replica', max_wal_senders: 4, wal_keep_size: '64MB' },
  });
  clusters.push(primary);
  await clusterStart(primary);
  const database = await provisionDatabase('haw', clusterUrl(primary));
  await migratePostgres(database.ownerUrl);
  await grantRuntime(database.ownerUrl, database.runtimeRole);
  const standby = await standbyCreate(primary, { label: 'haw-standby', applicationName: STANDBY_NAME });
  clusters.push(standby);
  await clusterStart(standby);
  const admin = poolOn(clusterUrl(primary, database.databaseName), primary.port);
  // Synchronous: an acknowledged commit is on the standby before the client hears of it.
  await admin.query(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
  await admin.query('SELECT pg_reload_conf()');
  await until(
    async () =>
      (await scalar<string>(admin, 'SELECT sync_state FROM pg_stat_replication WHERE application_name = $1', [
        STANDBY_NAME,
      ])) === 'sync',
    { what: 'the standby synchronous', timeoutMs: 30_000, retryErrors: true },
  );
  t.log(`primary :${primary.port}, synchronous standby :${standby.port}`);
  return { primary, standby, database };
}

async function leased(
  replica: ReturnType<typeof replicaOn>,
  caller: WorkerCaller,
  runIds: readonly string[],
): Promise<Map<string, LeaseRef>> {
  for (const runId of runIds)
    await replica.leases.enqueueJob({ runId, projectId: 'project-haw', argv: ['sleep', '600'] });
  const refs = new Map<string, LeaseRef>();
  while (refs.size < runIds.length) {
    const pulled = await replica.leases.pull(caller);
    if (pulled.kind !== 'assigned') throw new Error(`pull: ${pulled.kind}`);
    refs.set(pulled.assignment.runId, pulled.assignment);
  }
  return refs;
}

test('cluster gate 26: across a primary → standby promotion the lease-control wrapper loses no stop, delivers none twice, and refuses stale fences', async (t) => {
  t.timeout(300_000);
  const { primary, standby, database } = await startPair(t);
  const before = replicaOn(poolOn(database.runtimeUrl, primary.port), 'cp-before');
  const caller = { principal: 'CN=worker-haw', sessionId: await before.leases.registerSession('CN=worker-haw') };
  const [delivered, orphaned, waiting] = ['haw-delivered', 'haw-orphaned', 'haw-waiting'].map(
    (name) => `${name}-${randomUUID().slice(0, 8)}`,
  ) as [string, string, string];
  const refs = await leased(before, caller, [delivered, orphaned, waiting]);
  const ref = (runId: string) => refs.get(runId) as LeaseRef;
  for (const runId of [delivered, orphaned, waiting])
    await before.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
  t.like(await before.control.tick(caller, ref(delivered)), { kind: 'stop_requested', tracking: 'dispatched' });
  // A replica that claimed the orphaned run's dispatch and died with the primary before settling it.
  const run = await before.runStore.getRun(orphaned);
  const deadToken = createLeaseToken();
  const deadClaim = await before.repository.claim({
    runId: orphaned,
    attemptId: ref(orphaned).attemptId,
    cancelRequestedAtMs: run?.cancelRequestedAtMs ?? 0,
    owner: 'cp-dead',
    token: deadToken,
    leaseDurationMs: DEAD_CLAIM_LEASE_MS,
  });
  t.is(deadClaim.kind, 'claimed');

  await clusterStop(primary, 'immediate');
  await clusterPromote(standby);
  const after = replicaOn(poolOn(database.runtimeUrl, standby.port), 'cp-after');
  const adminAfter = poolOn(clusterUrl(standby, database.databaseName), standby.port);
  t.false(await scalar<boolean>(adminAfter, 'SELECT pg_is_in_recovery()'), 'the standby left recovery');
  await adminAfter.query('CHECKPOINT');
  t.is(
    await scalar<number>(adminAfter, 'SELECT timeline_id FROM pg_control_checkpoint()'),
    2,
    'the promoted standby is on timeline 2',
  );

  // Delivered before: replayed as the same stop, no second event.
  t.like(await after.control.tick(caller, ref(delivered)), { kind: 'stop_requested', tracking: 'dispatched' });
  t.is(await dispatchedEvents(adminAfter, delivered), 1);
  // Not ticked before: settled once on the new primary.
  t.like(await after.control.tick(caller, ref(waiting)), { kind: 'stop_requested', tracking: 'dispatched' });
  t.like(await after.control.tick(caller, ref(waiting)), { kind: 'stop_requested', tracking: 'dispatched' });
  t.is(await dispatchedEvents(adminAfter, waiting), 1);
  // The dead replica's claim: fails closed while its dispatch lease lives, then settles once.
  await t.throwsAsync(after.control.tick(caller, ref(orphaned)), { code: 'ERR_PIDFENCE_CLUSTER_DISPATCH_LEASED' });
  await until(
    async () =>
      (await after.control.tick(caller, ref(orphaned)).catch(() => ({ kind: 'failed' }))).kind === 'stop_requested',
    { what: "the orphaned stop settled after the dead replica's lease", timeoutMs: 60_000, intervalMs: 250 },
  );
  t.is(await dispatchedEvents(adminAfter, orphaned), 1, 'no stop lost, none recorded twice');
  // Stale fences: the dead replica's token, and a worker lease fence below the grant.
  const record = await after.repository.getRecord(orphaned);
  t.like(
    await after.repository.recordResult({
      runId: orphaned,
      attemptId: ref(orphaned).attemptId,
      owner: 'cp-dead',
      token: deadToken,
      expectedVersion: (record?.version ?? 1) - 1,
      result: 'termination_requested',
      eventId: `evt-${randomUUID()}`,
    }),
    { kind: 'stale_fence' },
  );
  t.deepEqual(await after.control.tick(caller, { ...ref(waiting), fence: ref(waiting).fence - 1 }), {
    kind: 'lost',
    reason: 'fence',
  });
  t.is(await dispatchedEvents(adminAfter, orphaned), 1);
});
