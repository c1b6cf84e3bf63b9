// The PostgreSQL HA gate (design/postgres §Verification, design/dispatch §6 gate 12, docs/decisions/0060): a throw-away primary
// and a streaming standby of its own; dispatch facts reach the standby through WAL, survive promotion
// (timeline 1 → 2), stay fenced on the new primary, and an in-flight result leaves nothing half-written.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import test, { type ExecutionContext } from 'ava';
import { Pool } from 'pg';

import { PidfenceError } from '../../lib/base/errors';
import {
  createLeaseToken,
  leaseTokenDigest,
  type CancellationDispatchRecord,
  type ClaimCommand,
  type DispatchResult,
  type RecordResultCommand,
  type RunEvent,
  type RunRecord,
} from '../../lib/contract/index';
import { grantRuntime, migratePostgres, openPostgresStore, type PostgresStore } from '../../lib/store/postgres/index';
import { DB_NOW_MS } from '../../lib/store/postgres/clock-statements';
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
import { provisionDatabase, type ProvisionedDatabase } from '../helpers/postgres';
import { until } from '../helpers/wait';
import { crashPointAfterDispatchUpdate } from '../helpers/pg-crash-point';
import { scalar, silentPool } from '../helpers/pg-pool';
import { seedCancelledRuns as seedRuns } from '../helpers/cancelled-runs';

/** application_name of the standby's WAL receiver; the primary names it in synchronous_standby_names. */
const STANDBY_NAME = 'pidfence_ha_standby';
/** Streaming on loopback replays in milliseconds; this bounds a stalled standby on 2 busy cores. */
const REPLICATION_WAIT_MS = 30_000;
/** Any fixed past instant: the seeded runs were "cancelled" then. */
const CANCELLED_AT_MS = 1_700_000_000_000;
/** Leases that must outlive the whole gate (the contract's maximum). */
const LONG_LEASE_MS = 10 * 60 * 1_000;
/**
 * The takeover lease: long enough to outlive the crash and promotion (~2-5 s here), so the new primary
 * first refuses the new owner, short enough that waiting it out keeps the gate to a few minutes.
 */
const TAKEOVER_LEASE_MS = 15_000;
const RETRY_DELAY_MS = 60_000;
const PHASE1_RUNS = 12;
const SYNC_BURST_RUNS = 16;
/** application_name of the session whose COMMIT is left waiting for the standby's apply. */
const COMMIT_WAIT_APP = 'pidfence_ha_commit_wait';
/** Gitignored; overwritten by each run. Its SHA-256 is printed like the seed's HA gate report. */
const REPORT_DIR = join(__dirname, '..', '..', '..', '.pidfence-test');
const REPORT_FILE = join(REPORT_DIR, 'ha-gate-report.json');

// ---------------------------------------------------------------------------------------------
// The world: one primary, one standby, one provisioned database, shared by the serial phases below.

interface Check {
  readonly phase: string;
  readonly name: string;
  readonly pass: boolean;
}

/** What the client was told was committed: the record and the events of every acknowledged write. */
interface Acknowledged {
  record: CancellationDispatchRecord;
  readonly events: RunEvent[];
}

interface Lease {
  readonly runId: string;
  readonly attemptId: string;
  readonly owner: string;
  readonly token: string;
  readonly version: number;
}

interface World {
  readonly primary: PgCluster;
  readonly standby: PgCluster;
  readonly database: ProvisionedDatabase;
  readonly pools: Pool[];
  readonly stores: PostgresStore[];
  readonly checks: Check[];
  readonly ledger: Map<string, Acknowledged>;
  /** Every raw token, owner and digest the gate used: none may appear in the report. */
  readonly secrets: Set<string>;
  readonly owners: { readonly a: string; readonly b: string };
  readonly report: Record<string, unknown>;
  readonly startedAtMs: number;
  /** Runs settled on the old primary (their fences are replayed after promotion). */
  settled: Lease[];
  /** Claimed on the old primary with TAKEOVER_LEASE_MS just before the crash. */
  takeover?: Lease;
  /** Claimed on the old primary; its result was in flight when the primary stopped. */
  inFlight?: Lease & { readonly run: RunRecord };
  /** Claimed on the old primary; its result's COMMIT was waiting for the standby when the primary stopped. */
  commitUnknown?: Lease & { readonly command: RecordResultCommand };
}

const clusters: PgCluster[] = [];
const openPools: Pool[] = [];
const openStores: PostgresStore[] = [];
let world: World | undefined;
let earlierPhaseFailed = false;

test.after.always(async () => {
  for (const store of openStores) await store.close().catch(() => undefined);
  for (const pool of openPools) await pool.end().catch(() => undefined);
  for (const cluster of clusters.reverse()) await clusterRemove(cluster);
});

function trackedPool(connectionString: string, max = 2): Pool {
  const pool = silentPool(connectionString, { max, connectionTimeoutMillis: 10_000 });
  openPools.push(pool);
  return pool;
}

async function storeOn(url: string, options: Parameters<typeof openPostgresStore>[1] = {}): Promise<PostgresStore> {
  const store = await openPostgresStore(url, { maxConnections: 2, ...options });
  openStores.push(store);
  return store;
}

/** The same URL on another port: the roles and the database reached the standby with the WAL. */
function onPort(url: string, port: number | undefined): string {
  const moved = new URL(url);
  moved.port = String(port);
  return moved.toString();
}

const eventually = (what: string, check: () => Promise<boolean>, timeoutMs = REPLICATION_WAIT_MS): Promise<number> =>
  until(check, { what, timeoutMs, intervalMs: 50, retryErrors: true });

/** Records a check for the report and asserts it. Never prints values: they may hold digests or owners. */
function check(t: ExecutionContext, phase: string, name: string, pass: boolean): void {
  world?.checks.push({ phase, name, pass });
  t.true(pass, name);
}

/** Like check, and on failure names the differing fields only (their values may be secrets). */
function checkSame(t: ExecutionContext, phase: string, name: string, actual: unknown, expected: unknown): void {
  const pass = isDeepStrictEqual(actual, expected);
  if (!pass && typeof actual === 'object' && actual !== null && typeof expected === 'object' && expected !== null) {
    const keys = new Set([...Object.keys(actual), ...Object.keys(expected)]);
    const differing = [...keys].filter(
      (key) => !isDeepStrictEqual((actual as Record<string, unknown>)[key], (expected as Record<string, unknown>)[key]),
    );
    t.log(`${name}: fields differ: ${differing.join(', ')}`);
  }
  check(t, phase, name, pass);
}

/** Serial phases of one world: a failed phase makes the later ones fail fast instead of misleading. */
function phase(title: string, body: (t: ExecutionContext, w: World) => Promise<void>): void {
  test.serial(title, async (t) => {
    t.teardown(() => {
      if (!t.passed) earlierPhaseFailed = true;
    });
    if (earlierPhaseFailed || world === undefined) return t.fail('an earlier phase failed: read that one first');
    await body(t, world);
  });
}

// ---------------------------------------------------------------------------------------------
// Setup: primary on timeline 1, a database with the two roles, migrations, a streaming standby.

test.before(async () => {
  const startedAtMs = Date.now();
  const primary = await clusterInit({
    label: 'ha-primary',
    settings: { wal_level: 'replica', max_wal_senders: 4, wal_keep_size: '64MB' },
  });
  clusters.push(primary);
  await clusterStart(primary);
  const database = await provisionDatabase('ha', clusterUrl(primary));
  await migratePostgres(database.ownerUrl);
  await grantRuntime(database.ownerUrl, database.runtimeRole);

  const standby = await standbyCreate(primary, { label: 'ha-standby', applicationName: STANDBY_NAME });
  clusters.push(standby);
  await clusterStart(standby);
  const primaryAdmin = trackedPool(clusterUrl(primary, database.databaseName));
  await eventually(
    'the primary sees the standby streaming',
    async () =>
      (await scalar<string>(
        primaryAdmin,
        "SELECT count(*)::text FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
        [STANDBY_NAME],
      )) === '1',
  );

  const version = await scalar<string>(primaryAdmin, 'SHOW server_version');
  const nonce = randomBytes(6).toString('hex');
  world = {
    primary,
    standby,
    database,
    pools: [],
    stores: [],
    checks: [],
    ledger: new Map(),
    secrets: new Set(),
    owners: { a: `ha-owner-a-${nonce}`, b: `ha-owner-b-${nonce}` },
    report: {
      gate: 'pg gate ha',
      covers: ['design/postgres §Verification (HA gate)', 'design/dispatch §6 gate 12'],
      serverVersion: version,
      setupMs: Date.now() - startedAtMs,
    },
    startedAtMs,
    settled: [],
  };
  world.secrets.add(world.owners.a).add(world.owners.b);
});

// ---------------------------------------------------------------------------------------------
// Store operations that keep the ledger of acknowledged facts.

async function seedCancelledRuns(w: World, prefix: string, count: number): Promise<string[]> {
  const owner = trackedPool(onPort(w.database.ownerUrl, w.primary.port), 1);
  try {
    return await seedRuns(owner, prefix, count, CANCELLED_AT_MS, 'project-ha');
  } finally {
    await owner.end();
  }
}

function claimCommand(w: World, runId: string, owner: string, leaseDurationMs: number): ClaimCommand {
  const token = createLeaseToken();
  w.secrets.add(token).add(leaseTokenDigest(token));
  return { runId, attemptId: `${runId}-a1`, cancelRequestedAtMs: CANCELLED_AT_MS, owner, token, leaseDurationMs };
}

async function claimAcknowledged(
  t: ExecutionContext,
  w: World,
  store: PostgresStore,
  command: ClaimCommand,
): Promise<Lease> {
  const outcome = await store.dispatchRepository.claim(command);
  if (outcome.kind !== 'claimed') throw new Error(`claim of ${command.runId}: ${outcome.kind}`);
  const previous = w.ledger.get(command.runId);
  if (previous === undefined) w.ledger.set(command.runId, { record: outcome.record, events: [] });
  else previous.record = outcome.record;
  // t.true, not t.is: a failing t.is would print the digests.
  t.true(
    outcome.record.leaseTokenDigest === leaseTokenDigest(command.token),
    'the claimed record carries the digest of its token',
  );
  return {
    runId: command.runId,
    attemptId: command.attemptId,
    owner: command.owner,
    token: command.token,
    version: outcome.record.version,
  };
}

function resultCommand(
  lease: Lease,
  result: DispatchResult,
  overrides: Partial<RecordResultCommand> = {},
): RecordResultCommand {
  const retry =
    result === 'dispatch_error' || result === 'controller_missing' || result === 'handle_missing'
      ? { retryDelayMs: RETRY_DELAY_MS }
      : {};
  return {
    runId: lease.runId,
    attemptId: lease.attemptId,
    owner: lease.owner,
    token: lease.token,
    expectedVersion: lease.version,
    result,
    eventId: `${lease.runId}-e${lease.version + 1}`,
    ...retry,
    ...overrides,
  };
}

async function resultAcknowledged(w: World, store: PostgresStore, command: RecordResultCommand): Promise<void> {
  const outcome = await store.dispatchRepository.recordResult(command);
  if (outcome.kind !== 'recorded') throw new Error(`result for ${command.runId}: ${outcome.kind}`);
  const entry = w.ledger.get(command.runId);
  if (entry === undefined) throw new Error('result without a claim in the ledger');
  entry.record = outcome.record;
  entry.events.push(outcome.event);
}

/** Every acknowledged record and event, read back through the store on `store`; true when all match. */
async function ledgerMatches(
  t: ExecutionContext,
  w: World,
  store: PostgresStore,
  where: string,
): Promise<{ records: number; events: number; mismatches: number }> {
  let records = 0;
  let events = 0;
  let mismatches = 0;
  for (const [runId, acknowledged] of w.ledger) {
    const record = await store.dispatchRepository.getRecord(runId);
    const stored = await store.runStore.listEvents(runId);
    if (isDeepStrictEqual(record, acknowledged.record)) records += 1;
    else mismatches += 1;
    if (isDeepStrictEqual(stored, acknowledged.events)) events += stored.length;
    else mismatches += 1;
    if (
      record?.leaseTokenDigest !== null &&
      record?.leaseTokenDigest !== undefined &&
      !w.secrets.has(record.leaseTokenDigest)
    )
      mismatches += 1;
  }
  if (mismatches > 0) t.log(`${where}: ${mismatches} record or event list(s) differ from what was acknowledged`);
  return { records, events, mismatches };
}

interface TableCounts {
  readonly dispatches: Record<string, number>;
  readonly dispatchRows: number;
  readonly events: number;
  readonly digests: number;
}

async function tableCounts(admin: Pool): Promise<TableCounts> {
  const { rows } = await admin.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM cancellation_dispatches GROUP BY status ORDER BY status',
  );
  const dispatches = Object.fromEntries(rows.map((row) => [row.status, row.n]));
  return {
    dispatches,
    dispatchRows: rows.reduce((sum, row) => sum + row.n, 0),
    events: await scalar<number>(admin, 'SELECT count(*)::int FROM run_events'),
    digests: await scalar<number>(admin, 'SELECT count(lease_token_digest)::int FROM cancellation_dispatches'),
  };
}

function ledgerCounts(w: World): TableCounts {
  const dispatches: Record<string, number> = {};
  let events = 0;
  let digests = 0;
  for (const { record, events: list } of w.ledger.values()) {
    dispatches[record.status] = (dispatches[record.status] ?? 0) + 1;
    events += list.length;
    if (record.leaseTokenDigest !== null) digests += 1;
  }
  const sorted = Object.fromEntries(Object.entries(dispatches).sort(([a], [b]) => a.localeCompare(b)));
  return { dispatches: sorted, dispatchRows: w.ledger.size, events, digests };
}

async function waitForReplay(primaryAdmin: Pool, standbyAdmin: Pool): Promise<{ lsn: string; waitedMs: number }> {
  const lsn = await scalar<string>(primaryAdmin, 'SELECT pg_current_wal_lsn()::text');
  const waitedMs = await eventually(
    'the standby replays the primary WAL',
    async () => await scalar<boolean>(standbyAdmin, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn', [lsn]),
  );
  return { lsn, waitedMs };
}

/** Every WAL segment file of a cluster, as bytes (a fresh cluster holds a few 16 MB segments). */
function walBytes(cluster: PgCluster): Buffer {
  const walDir = join(cluster.dataDir, 'pg_wal');
  const segments = readdirSync(walDir)
    .filter((name) => /^[0-9A-F]{24}$/.test(name))
    .sort();
  return Buffer.concat(segments.map((name) => readFileSync(join(walDir, name))));
}

// ---------------------------------------------------------------------------------------------
// Phases

const RESULT_MIX: readonly DispatchResult[] = [
  'termination_requested',
  'already_exited',
  'identity_mismatch',
  'dispatch_error',
];

phase(
  'pg gate ha: claims and results on the primary reach the streaming standby through WAL (rows, events and digests read on the standby)',
  async (t, w) => {
    const name = 'wal-to-standby';
    const primaryStore = await storeOn(onPort(w.database.runtimeUrl, w.primary.port));
    const runIds = await seedCancelledRuns(w, 'ha1', PHASE1_RUNS);
    const tokens: string[] = [];
    for (const [i, runId] of runIds.entries()) {
      const command = claimCommand(w, runId, w.owners.a, LONG_LEASE_MS);
      tokens.push(command.token);
      const lease = await claimAcknowledged(t, w, primaryStore, command);
      // The last two stay leased: their digests must reach the standby too.
      if (i < PHASE1_RUNS - 2) {
        await resultAcknowledged(
          w,
          primaryStore,
          resultCommand(lease, RESULT_MIX[i % RESULT_MIX.length] ?? 'termination_requested'),
        );
        w.settled.push(lease);
      }
    }

    const primaryAdmin = trackedPool(clusterUrl(w.primary, w.database.databaseName));
    const standbyAdmin = trackedPool(clusterUrl(w.standby, w.database.databaseName));
    check(
      t,
      name,
      'the standby is in recovery (a hot standby, read-only)',
      await scalar<boolean>(standbyAdmin, 'SELECT pg_is_in_recovery()'),
    );
    check(
      t,
      name,
      'the standby streams from the primary',
      (await scalar<string>(primaryAdmin, 'SELECT state FROM pg_stat_replication WHERE application_name = $1', [
        STANDBY_NAME,
      ])) === 'streaming',
    );
    const replay = await waitForReplay(primaryAdmin, standbyAdmin);

    // Read through the store itself, as the runtime role, on the standby: readiness passes read-only.
    const standbyStore = await storeOn(onPort(w.database.runtimeUrl, w.standby.port));
    const matched = await ledgerMatches(t, w, standbyStore, 'standby');
    check(
      t,
      name,
      'every acknowledged dispatch record and event list reads back identical on the standby',
      matched.mismatches === 0 && matched.records === PHASE1_RUNS,
    );
    const onStandby = await tableCounts(standbyAdmin);
    checkSame(
      t,
      name,
      'the standby holds exactly the acknowledged rows: dispatches by status, events, digests',
      onStandby,
      ledgerCounts(w),
    );
    checkSame(t, name, 'the primary and the standby agree row for row', onStandby, await tableCounts(primaryAdmin));
    const leased = [...w.ledger.values()].filter((entry) => entry.record.status === 'leased');
    check(
      t,
      name,
      'the leased rows on the standby carry the digest of their token',
      leased.length === 2 &&
        leased.every((entry) => entry.record.leaseTokenDigest !== null && w.secrets.has(entry.record.leaseTokenDigest)),
    );
    const wal = walBytes(w.standby);
    check(
      t,
      name,
      "no raw token (text or bytes) is in the standby's WAL",
      tokens.every(
        (token) => !wal.includes(Buffer.from(token, 'utf8')) && !wal.includes(Buffer.from(token, 'base64url')),
      ),
    );
    check(
      t,
      name,
      "the live leases' digests are in the standby's WAL (the scan sees stored text)",
      leased.every((entry) => wal.includes(Buffer.from(entry.record.leaseTokenDigest ?? '-', 'utf8'))),
    );
    check(
      t,
      name,
      'the standby is on timeline 1',
      (await scalar<number>(standbyAdmin, 'SELECT timeline_id FROM pg_control_checkpoint()')) === 1,
    );

    w.report['walToStandby'] = {
      runs: PHASE1_RUNS,
      replayLsn: replay.lsn,
      replayWaitMs: replay.waitedMs,
      counts: onStandby,
    };
    t.log(
      `${PHASE1_RUNS} claims, ${PHASE1_RUNS - 2} results; standby replayed to ${replay.lsn} in ${replay.waitedMs} ms; counts ${JSON.stringify(onStandby)}`,
    );
  },
);

phase(
  'pg gate ha: with synchronous replication, acknowledged commits are on the standby; a result in flight inside pidfence_record_result when the primary stops fails typed (COMMIT_UNKNOWN, as does one whose COMMIT waits)',
  async (t, w) => {
    const name = 'in-flight-stop';
    const primaryAdmin = trackedPool(clusterUrl(w.primary, w.database.databaseName));
    const standbyAdmin = trackedPool(clusterUrl(w.standby, w.database.databaseName));
    // synchronous_commit stays at its default `on`: COMMIT returns once the standby has flushed the WAL.
    await primaryAdmin.query(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
    await primaryAdmin.query('SELECT pg_reload_conf()');
    await eventually(
      'the standby becomes synchronous',
      async () =>
        (await scalar<string>(primaryAdmin, 'SELECT sync_state FROM pg_stat_replication WHERE application_name = $1', [
          STANDBY_NAME,
        ])) === 'sync',
    );
    const syncState = await scalar<string>(
      primaryAdmin,
      'SELECT sync_state FROM pg_stat_replication WHERE application_name = $1',
      [STANDBY_NAME],
    );
    check(
      t,
      name,
      'the standby is synchronous (sync_state = sync, synchronous_commit = on)',
      syncState === 'sync' && (await scalar<string>(primaryAdmin, 'SHOW synchronous_commit')) === 'on',
    );

    const primaryUrl = onPort(w.database.runtimeUrl, w.primary.port);
    const primaryStore = await storeOn(primaryUrl);
    const burst = await seedCancelledRuns(w, 'ha2', SYNC_BURST_RUNS + 3);
    for (const runId of burst.slice(0, SYNC_BURST_RUNS)) {
      const lease = await claimAcknowledged(t, w, primaryStore, claimCommand(w, runId, w.owners.a, LONG_LEASE_MS));
      await resultAcknowledged(w, primaryStore, resultCommand(lease, 'termination_requested'));
      w.settled.push(lease);
    }
    const [takeoverRun = '', inFlightRun = '', commitRun = ''] = burst.slice(SYNC_BURST_RUNS);
    w.takeover = await claimAcknowledged(
      t,
      w,
      primaryStore,
      claimCommand(w, takeoverRun, w.owners.a, TAKEOVER_LEASE_MS),
    );
    const inFlightLease = await claimAcknowledged(
      t,
      w,
      primaryStore,
      claimCommand(w, inFlightRun, w.owners.a, LONG_LEASE_MS),
    );
    const commitLease = await claimAcknowledged(
      t,
      w,
      primaryStore,
      claimCommand(w, commitRun, w.owners.a, LONG_LEASE_MS),
    );
    const runBefore = await primaryStore.runStore.getRun(inFlightRun);
    if (runBefore === null) throw new Error('the in-flight run is missing');
    w.inFlight = { ...inFlightLease, run: runBefore };
    const lastAcknowledgedLsn = await scalar<string>(primaryAdmin, 'SELECT pg_current_wal_flush_lsn()::text');

    // Installed before the COMMIT below is left waiting: CREATE TRIGGER would queue behind its locks.
    const crashPoint = await crashPointAfterDispatchUpdate(primaryAdmin, inFlightRun);

    // A COMMIT left waiting: this session asks for remote_apply and the standby's replay is paused, so
    // the commit record is written and streamed but never acknowledged to the client.
    await standbyAdmin.query('SELECT pg_wal_replay_pause()');
    await eventually(
      'the standby replay pauses',
      async () => (await scalar<string>(standbyAdmin, 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
    );
    const commitWaitUrl = new URL(primaryUrl);
    commitWaitUrl.searchParams.set('application_name', COMMIT_WAIT_APP);
    commitWaitUrl.searchParams.set('options', '-c synchronous_commit=remote_apply');
    const waitingStore = await storeOn(commitWaitUrl.toString());
    const commitCommand = resultCommand(commitLease, 'already_exited');
    w.commitUnknown = { ...commitLease, command: commitCommand };
    const waitingResult = waitingStore.dispatchRepository.recordResult(commitCommand);
    waitingResult.catch(() => undefined);
    await eventually(
      'the result COMMIT waits for the standby (wait_event SyncRep)',
      async () =>
        (await scalar<number>(
          primaryAdmin,
          "SELECT count(*)::int FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'SyncRep'",
          [COMMIT_WAIT_APP],
        )) === 1,
    );

    // The crash point parks pidfence_record_result itself after its dispatch UPDATE, before the run
    // CAS and the event insert: the primary is stopped right there, as a crash (immediate: no
    // shutdown checkpoint). The trigger stays on the promoted standby, inert: nobody holds its lock.
    const startedAt = Date.now();
    const settling = primaryStore.dispatchRepository.recordResult(
      resultCommand(inFlightLease, 'termination_requested'),
    );
    settling.catch(() => undefined);
    const parked = await crashPoint.parked();
    check(
      t,
      name,
      'the result transaction is open inside the function production calls when the primary stops',
      /pidfence_record_result\(/.test(parked.query),
    );
    await clusterStop(w.primary, 'immediate');
    const error = await t.throwsAsync(settling, { instanceOf: PidfenceError });
    await crashPoint.remove();
    const failedAfterMs = Date.now() - startedAt;
    check(
      t,
      name,
      'the in-flight result fails with ERR_PIDFENCE_STORE_COMMIT_UNKNOWN (one statement sent, its end unseen; the promotion phase proves nothing was committed)',
      error?.code === 'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN',
    );
    check(
      t,
      name,
      'the error text carries no token, owner or digest',
      error !== undefined && ![...w.secrets].some((secret) => error.message.includes(secret)),
    );
    const commitError = await waitingResult.then(
      () => undefined,
      (failure: unknown) => failure,
    );
    check(
      t,
      name,
      'the result whose COMMIT was waiting for the standby fails with ERR_PIDFENCE_STORE_COMMIT_UNKNOWN',
      commitError instanceof PidfenceError && commitError.code === 'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN',
    );
    check(
      t,
      name,
      'a store call on the stopped primary fails typed, too',
      await primaryStore.dispatchRepository.getRecord(inFlightRun).then(
        () => false,
        (failure: unknown) => failure instanceof PidfenceError && failure.code === 'ERR_PIDFENCE_STORE_UNAVAILABLE',
      ),
    );
    const received = await scalar<boolean>(standbyAdmin, 'SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn', [
      lastAcknowledgedLsn,
    ]);
    check(t, name, 'the standby had received the WAL of every acknowledged commit before promotion', received);
    // Promotion would end the pause too; resuming first keeps the two steps apart.
    await standbyAdmin.query('SELECT pg_wal_replay_resume()');

    w.report['inFlightStop'] = {
      replication: 'synchronous (synchronous_standby_names = the standby, synchronous_commit = on)',
      stopMode: 'immediate, inside the result transaction after the dispatch UPDATE',
      acknowledgedInBurst: SYNC_BURST_RUNS * 2 + 3,
      commitUnknownCode: commitError instanceof PidfenceError ? commitError.code : 'none',
      lastAcknowledgedLsn,
      errorCode: error?.code,
      errno: error?.errno,
      failedAfterMs,
    };
    t.log(
      `${SYNC_BURST_RUNS} synchronous claim+result pairs acknowledged up to ${lastAcknowledgedLsn}; in-flight result failed ${error?.code ?? '?'} (${error?.errno ?? '?'}) after ${failedAfterMs} ms`,
    );
  },
);

phase(
  'pg gate ha: gate 12 — promotion moves the timeline 1 → 2, every acknowledged fact is readable on the new primary, and the in-flight result left nothing half-written',
  async (t, w) => {
    const name = 'promotion';
    const standbyAdmin = trackedPool(clusterUrl(w.standby, w.database.databaseName));
    const timelineBefore = await scalar<number>(standbyAdmin, 'SELECT timeline_id FROM pg_control_checkpoint()');
    const startedAt = Date.now();
    await clusterPromote(w.standby);
    const promotedMs = Date.now() - startedAt;
    const admin = trackedPool(clusterUrl(w.standby, w.database.databaseName));
    check(t, name, 'the new primary has left recovery', !(await scalar<boolean>(admin, 'SELECT pg_is_in_recovery()')));
    await admin.query('CHECKPOINT');
    const timelineAfter = await scalar<number>(admin, 'SELECT timeline_id FROM pg_control_checkpoint()');
    const walFile = await scalar<string>(admin, 'SELECT pg_walfile_name(pg_current_wal_lsn())');
    check(
      t,
      name,
      'the timeline moved 1 → 2 (control file and WAL file name)',
      timelineBefore === 1 && timelineAfter === 2 && walFile.startsWith('00000002'),
    );
    check(
      t,
      name,
      'the timeline history file 00000002.history exists',
      readdirSync(join(w.standby.dataDir, 'pg_wal')).includes('00000002.history'),
    );

    // The runtime role on the new primary: readiness (checked by openPostgresStore) passes as before.
    const store = await storeOn(onPort(w.database.runtimeUrl, w.standby.port));

    // The COMMIT_UNKNOWN result: its commit record had reached the standby (flushed, not yet applied when
    // the primary died), so after promotion it is there. The caller re-reads, as the error text says.
    const unknown = w.commitUnknown;
    const unknownEntry = unknown === undefined ? undefined : w.ledger.get(unknown.runId);
    if (unknown === undefined || unknownEntry === undefined) throw new Error('no COMMIT_UNKNOWN run');
    const reread = await store.dispatchRepository.getRecord(unknown.runId);
    const rereadEvents = await store.runStore.listEvents(unknown.runId);
    check(
      t,
      name,
      'COMMIT_UNKNOWN run: the re-read finds the result committed exactly once (version +1, dispatched, one event, lease cleared)',
      reread !== null &&
        reread.version === unknown.version + 1 &&
        reread.status === 'dispatched' &&
        reread.lastResult === 'already_exited' &&
        reread.leaseTokenDigest === null &&
        rereadEvents.length === 1 &&
        rereadEvents[0]?.id === unknown.command.eventId,
    );
    check(
      t,
      name,
      'COMMIT_UNKNOWN run: a retry with the same fence is refused (stale_fence), so it cannot apply twice',
      (await store.dispatchRepository.recordResult(unknown.command)).kind === 'stale_fence',
    );
    if (reread !== null) unknownEntry.record = reread;
    unknownEntry.events.push(...rereadEvents);

    const matched = await ledgerMatches(t, w, store, 'new primary');
    check(
      t,
      name,
      'every acknowledged dispatch record and event list reads back identical on the new primary',
      matched.mismatches === 0 && matched.records === w.ledger.size,
    );
    const counts = await tableCounts(admin);
    checkSame(
      t,
      name,
      'the new primary holds exactly the acknowledged rows: dispatches by status, events, digests',
      counts,
      ledgerCounts(w),
    );

    const inFlight = w.inFlight;
    if (inFlight === undefined) throw new Error('no in-flight run');
    checkSame(
      t,
      name,
      'in-flight run: the dispatch row is the acknowledged claim (leased, same version and digest)',
      await store.dispatchRepository.getRecord(inFlight.runId),
      w.ledger.get(inFlight.runId)?.record,
    );
    checkSame(
      t,
      name,
      'in-flight run: the run version and event sequence did not move',
      await store.runStore.getRun(inFlight.runId),
      inFlight.run,
    );
    check(
      t,
      name,
      'in-flight run: no event was appended',
      (await store.runStore.listEvents(inFlight.runId)).length === 0,
    );
    // Nothing half-written means the old fence is still whole: the same result, retried, settles once.
    await resultAcknowledged(w, store, resultCommand(inFlight, 'termination_requested'));
    check(
      t,
      name,
      'in-flight run: retried with the same fence on the new primary, the result settles exactly once',
      (await store.runStore.listEvents(inFlight.runId)).length === 1 &&
        (await store.dispatchRepository.recordResult(resultCommand(inFlight, 'termination_requested'))).kind ===
          'stale_fence',
    );

    w.report['timeline'] = { before: timelineBefore, after: timelineAfter, walFile, promoteMs: promotedMs };
    w.report['promotion'] = { counts, acknowledgedRecords: matched.records, acknowledgedEvents: matched.events };
    t.log(
      `promoted in ${promotedMs} ms; timeline ${timelineBefore} → ${timelineAfter} (${walFile}); ${matched.records} records and ${matched.events} events match; counts ${JSON.stringify(counts)}`,
    );
  },
);

phase(
  'pg gate ha: gate 12 — the old owner, token and version stay fenced on the new primary; a new owner takes over once the new primary clock passes the lease',
  async (t, w) => {
    const name = 'fencing';
    const store = await storeOn(onPort(w.database.runtimeUrl, w.standby.port));
    const admin = trackedPool(clusterUrl(w.standby, w.database.databaseName));
    const takeover = w.takeover;
    if (takeover === undefined) throw new Error('no takeover run');

    // Fences settled on the old primary, replayed on the new one.
    const replays = await Promise.all(
      w.settled.map((lease) =>
        store.dispatchRepository.recordResult(
          resultCommand(lease, 'already_exited', { eventId: `${lease.runId}-replay` }),
        ),
      ),
    );
    check(
      t,
      name,
      `all ${w.settled.length} fences settled on the old primary are stale on the new primary`,
      replays.every((outcome) => outcome.kind === 'stale_fence'),
    );

    const leasedRecord = await store.dispatchRepository.getRecord(takeover.runId);
    const expiresAtMs = leasedRecord?.leaseExpiresAtMs ?? 0;
    const nowBefore = Number(await scalar<string>(admin, `SELECT ${DB_NOW_MS}`));
    check(
      t,
      name,
      'the takeover lease granted by the old primary is still unexpired by the new primary clock',
      nowBefore < expiresAtMs,
    );
    const early = await store.dispatchRepository.claim(claimCommand(w, takeover.runId, w.owners.b, LONG_LEASE_MS));
    check(t, name, 'before expiry a new owner is refused (leased)', early.kind === 'leased');
    const wrongToken = await store.dispatchRepository.recordResult(
      resultCommand(takeover, 'termination_requested', { token: createLeaseToken() }),
    );
    const wrongVersion = await store.dispatchRepository.recordResult(
      resultCommand(takeover, 'termination_requested', { expectedVersion: takeover.version + 1 }),
    );
    const wrongOwner = await store.dispatchRepository.recordResult(
      resultCommand(takeover, 'termination_requested', { owner: w.owners.b }),
    );
    check(
      t,
      name,
      'a wrong token, version or owner cannot settle the old lease',
      [wrongToken, wrongVersion, wrongOwner].every((outcome) => outcome.kind === 'stale_fence'),
    );
    checkSame(
      t,
      name,
      'the refused attempts changed nothing',
      await store.dispatchRepository.getRecord(takeover.runId),
      w.ledger.get(takeover.runId)?.record,
    );

    const waitedMs = await eventually(
      'the new primary clock passes the lease expiry',
      async () => Number(await scalar<string>(admin, `SELECT ${DB_NOW_MS}`)) >= expiresAtMs,
      TAKEOVER_LEASE_MS + 10_000,
    );
    const claimB = claimCommand(w, takeover.runId, w.owners.b, LONG_LEASE_MS);
    const leaseB = await claimAcknowledged(t, w, store, claimB);
    const recordB = w.ledger.get(takeover.runId)?.record;
    check(
      t,
      name,
      'after expiry (by the new primary clock) the new owner takes over: version +1, dispatch count 2, its own digest',
      recordB !== undefined &&
        recordB.version === takeover.version + 1 &&
        recordB.dispatchCount === 2 &&
        recordB.leaseOwner === w.owners.b &&
        recordB.leaseTokenDigest === leaseTokenDigest(claimB.token) &&
        (recordB.lastDispatchedAtMs ?? 0) >= expiresAtMs,
    );
    const stale = await store.dispatchRepository.recordResult(resultCommand(takeover, 'termination_requested'));
    check(
      t,
      name,
      "the old owner's exact fence (owner, token, version) is stale after the takeover",
      stale.kind === 'stale_fence',
    );
    checkSame(
      t,
      name,
      "the stale result did not touch the new owner's lease",
      await store.dispatchRepository.getRecord(takeover.runId),
      recordB,
    );
    await resultAcknowledged(w, store, resultCommand(leaseB, 'termination_requested'));
    check(
      t,
      name,
      'the new owner settles its lease on the new primary',
      w.ledger.get(takeover.runId)?.record.status === 'dispatched',
    );
    const counts = await tableCounts(admin);
    checkSame(t, name, 'the new primary still holds exactly the acknowledged rows', counts, ledgerCounts(w));

    w.report['fencing'] = {
      replayedStaleFences: w.settled.length,
      takeoverLeaseMs: TAKEOVER_LEASE_MS,
      waitedForExpiryMs: waitedMs,
      counts,
    };
    t.log(
      `${w.settled.length} replayed fences stale; takeover after waiting ${waitedMs} ms for the new primary clock; counts ${JSON.stringify(counts)}`,
    );
  },
);

phase(
  'pg gate ha: the written report holds checks, timeline and counts, and no token, owner or digest',
  async (t, w) => {
    const passed = w.checks.filter((entry) => entry.pass).length;
    const report = {
      ...w.report,
      node: process.version,
      durationMs: Date.now() - w.startedAtMs,
      checks: w.checks,
      summary: `${passed}/${w.checks.length}`,
    };
    const text = `${JSON.stringify(report, null, 2)}\n`;
    mkdirSync(REPORT_DIR, { recursive: true });
    writeFileSync(REPORT_FILE, text);
    const written = readFileSync(REPORT_FILE, 'utf8');
    const leaked = [...w.secrets].filter((secret) => written.includes(secret)).length;
    t.is(leaked, 0, 'the report contains none of the raw tokens, owners or digests the gate used');
    t.true(w.secrets.size >= 2 * (w.ledger.size + 1), `searched for ${w.secrets.size} secrets`);
    t.is(passed, w.checks.length, 'every check passed');
    t.true(w.checks.length >= 25);
    const sha256 = createHash('sha256').update(written).digest('hex');
    t.log(`report ${REPORT_FILE}: ${report.summary} checks, SHA-256 ${sha256}`);
  },
);
