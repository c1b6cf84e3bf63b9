// A project-wide cancel in one statement (docs/decisions/0320, 0203) on a real PostgreSQL, through the
// control plane over HTTPS and through the store: every active run of the project gets what the single
// cancel writes (intent, one `run.cancel_requested`, the pending dispatch; a queued run ends
// `cancelled`), all in one transaction and one round trip; a repeat changes nothing; a single cancel
// racing it, in either order, still leaves one event; refused and malformed requests change nothing.
import { Pool, type PoolClient } from 'pg';
import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { startControlPlane, type ControlPlane } from '../../lib/cluster/control-plane';
import { createLeaseToken, type ClaimOutcome } from '../../lib/contract/index';
import {
  PostgresDispatchRepository,
  PostgresGrantAdministration,
  PostgresRunStore,
} from '../../lib/store/postgres/index';
import { PROJECT_CANCEL_LIMIT } from '../../lib/store/postgres/run-store';
import { RUN_SQL } from '../../lib/store/postgres/run-statements';
import { makeCertificates, type Certificates } from '../helpers/certificates';
import { adminUrlFor, type MigratedDatabase } from '../helpers/pg-store';
import { until } from '../helpers/wait';
import { tallyWire, wireSince } from '../helpers/wire-tally';
import { clusterFixture, type ClusterWorld } from './world';

// Leases outlive the seeding: a lapsed session's runs would be marked unreachable (docs/decisions/0270).
const ready = clusterFixture('cluster_project_cancel', 600_000);
const OPERATOR = 'operator-pc';
let certificates: Certificates | undefined;
let plane: ControlPlane | undefined;
const clients: ControlPlaneClient[] = [];
test.after.always(async () => {
  for (const client of clients) client.close();
  await plane?.close();
  certificates?.remove();
});

/** One replica for the file, and a client with the certificate of `subject`. */
async function clientOf(subject: string): Promise<ControlPlaneClient> {
  const { database } = await ready;
  certificates ??= makeCertificates();
  plane ??= await startControlPlane({
    databaseUrl: database.runtimeUrl,
    tls: { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert },
  });
  const pem = certificates.client(subject);
  const client = new ControlPlaneClient(plane.url, { cert: pem.cert, key: pem.key, ca: certificates.ca.cert });
  clients.push(client);
  return client;
}

/** run.stop, and run.read: the single cancel answers a run its caller cannot read as not found. */
async function grantStop(database: MigratedDatabase, projectId: string): Promise<void> {
  for (const permission of ['run.read', 'run.stop'] as const)
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: OPERATOR, projectId, permission },
      'test-owner',
    );
}

/** Runs `work` for each item, four at a time (the world's pool has four connections). */
async function inLanes<T>(items: readonly T[], work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

interface Seeded {
  readonly running: string[];
  readonly queued: string[];
}

/**
 * `running` jobs pulled by a worker (a running run with an active attempt), then `queued` jobs nobody
 * pulled. A pull takes the oldest waiting job: pull every running run before queued ones are added, and
 * leave none behind but in the file's last test.
 */
async function seed(world: ClusterWorld, projectId: string, running: number, queued: number): Promise<Seeded> {
  const ids = (kind: string, count: number): string[] =>
    Array.from({ length: count }, (_, i) => `${projectId}-${kind}-${String(i).padStart(4, '0')}`);
  const seeded = { running: ids('r', running), queued: ids('q', queued) };
  const enqueue = (runId: string) => world.leases.enqueueJob({ runId, projectId, argv: ['sleep', '30'] });
  await inLanes(seeded.running, enqueue);
  const principal = `worker-${projectId}`;
  const caller = { principal, sessionId: await world.leases.registerSession(principal) };
  const pulled = new Set<string>();
  while (seeded.running.some((runId) => !pulled.has(runId))) {
    const page = await world.leases.pullPage(caller, 64);
    if (page.kind !== 'assigned') throw new Error(`pull found ${page.kind}`);
    for (const assignment of page.assignments) pulled.add(assignment.runId);
  }
  await inLanes(seeded.queued, enqueue);
  return seeded;
}

/** Every row a cancel may write for `runIds`: runs, their events and their dispatch rows. */
async function snapshot(database: MigratedDatabase, runIds: readonly string[]): Promise<unknown> {
  const { rows } = await database.owner.query(
    `SELECT (SELECT json_agg(r ORDER BY r.id) FROM runs AS r WHERE r.id = ANY ($1)) AS runs,
       (SELECT json_agg(e ORDER BY e.run_id, e.seq) FROM run_events AS e WHERE e.run_id = ANY ($1)) AS events,
       (SELECT json_agg(d ORDER BY d.run_id) FROM cancellation_dispatches AS d WHERE d.run_id = ANY ($1)) AS dispatches`,
    [runIds],
  );
  return rows[0];
}

/** How many transactions last wrote these runs, their cancel events and their dispatch rows. */
async function writingTransactions(database: MigratedDatabase, runIds: readonly string[]): Promise<number> {
  const { rows } = await database.owner.query<{ n: number }>(
    `SELECT count(DISTINCT x)::int AS n FROM (
       SELECT xmin::text AS x FROM runs WHERE id = ANY ($1)
       UNION ALL SELECT xmin::text FROM run_events WHERE run_id = ANY ($1) AND type IN ('run.cancel_requested', 'run.terminal')
       UNION ALL SELECT xmin::text FROM cancellation_dispatches WHERE run_id = ANY ($1)) AS written`,
    [runIds],
  );
  return rows[0]?.n ?? -1;
}

/** What a cancel left on one run, in a form two runs cancelled by the two paths can be compared by. */
async function trace(world: ClusterWorld, database: MigratedDatabase, runId: string): Promise<unknown> {
  const run = await world.runStore.getRun(runId);
  const listed = await world.runStore.listEvents(runId);
  // The cancel's event is written at the intent's time; a queued run's end follows it (the single
  // path ends it in a second transaction, the project cancel in the same one).
  const events = listed.map((event) => ({
    type: event.type,
    seq: event.seq,
    payload: event.payload,
    ...(event.type === 'run.cancel_requested' ? { atCancel: event.createdAtMs === run?.cancelRequestedAtMs } : {}),
  }));
  const { rows } = await database.owner.query(
    `SELECT d.status, d.version::int, d.dispatch_count::int, d.next_attempt_at_ms = r.cancel_requested_at_ms AS due_at_cancel,
       d.created_at_ms = r.cancel_requested_at_ms AS written_at_cancel, d.lease_owner, d.last_result,
       d.attempt_id = a.id AS bound_to_active_attempt
     FROM cancellation_dispatches AS d JOIN runs AS r ON r.id = d.run_id
     LEFT JOIN attempts AS a ON a.run_id = d.run_id AND a.status IN ('claimed', 'starting', 'running')
     WHERE d.run_id = $1`,
    [runId],
  );
  return {
    status: run?.status,
    version: run?.version,
    nextEventSeq: run?.nextEventSeq,
    reason: run?.cancelReason,
    updatedAtLastEvent: run?.updatedAtMs === listed[listed.length - 1]?.createdAtMs,
    events,
    dispatch: rows,
  };
}

const cancelEvents = async (world: ClusterWorld, runId: string): Promise<number> =>
  (await world.runStore.listEvents(runId)).filter((event) => event.type === 'run.cancel_requested').length;

/** A node of auto_explain's JSON plan; the actual counts only with log_analyze. */
interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly Filter?: string;
  readonly 'Recheck Cond'?: string;
  readonly 'Actual Rows'?: number;
  readonly 'Actual Loops'?: number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: readonly PlanNode[];
}

/**
 * Has auto_explain print the plan of every statement `client` runs, nested ones too, as a notice
 * (with `analyze`, each node's actual rows); answers the plans printed so far. Only a superuser's
 * connection may load it.
 */
async function explainEverything(
  client: PoolClient,
  options: { readonly analyze: boolean },
): Promise<() => Array<{ readonly 'Query Text': string; readonly Plan: PlanNode }>> {
  const notices: string[] = [];
  client.on('notice', (notice) => notices.push(notice.message ?? ''));
  await client.query(`LOAD 'auto_explain'`);
  const settings = ['log_min_duration = 0', 'log_nested_statements = on', 'log_level = notice', 'log_format = json'];
  if (options.analyze) settings.push('log_analyze = on', 'log_timing = off');
  for (const setting of settings) await client.query(`SET auto_explain.${setting}`);
  return () =>
    notices
      .map((message) => JSON.parse(message.slice(message.indexOf('{'))) as { 'Query Text': string; Plan: PlanNode })
      .filter((explained) => explained.Plan !== undefined);
}

/**
 * Each node of `plan` that reads `runs` and searches the page's ids other than as the first key of
 * an index (`byId`: the primary key and the unique (id, project_id)): one descent per id, not a walk.
 */
function pageSearches(plan: PlanNode, statement: string, byId: ReadonlySet<string>): string[] {
  const found: string[] = [];
  const bitmapIndex = plan.Plans?.find((child) => child['Node Type'] === 'Bitmap Index Scan')?.['Index Name'];
  const index = plan['Index Name'] ?? bitmapIndex;
  const searchesPage = (text: string | undefined): boolean => text !== undefined && /(^|[^\w])id = ANY/.test(text);
  const searches = [plan['Index Cond'], plan.Filter, plan['Recheck Cond']].some(searchesPage);
  if (plan['Relation Name'] === 'runs' && searches && (!byId.has(index ?? '') || searchesPage(plan.Filter)))
    found.push(`${plan['Node Type']} ${index ?? ''} in: ${statement.replace(/\s+/g, ' ').slice(0, 120)}`);
  for (const child of plan.Plans ?? []) found.push(...pageSearches(child, statement, byId));
  return found;
}

test.serial(
  'a project cancel finds its page’s runs through an index led by the run id in every statement, never by searching the page row by row (docs/decisions/0445)',
  async (t) => {
    const { database, world } = await ready;
    const runs = 1_000;
    await seed(world, 'proj-plans', runs - 100, 100);
    // The statistics as autovacuum keeps them while no cancel is open: this is the file's first cancel.
    await database.owner.query('ANALYZE runs');
    const client = await database.admin.connect();
    t.teardown(() => client.release(true));
    const plans = await explainEverything(client, { analyze: false });
    const { rows } = await client.query<{ outcome: unknown }>(RUN_SQL.cancelProjectCall, [
      'proj-plans',
      'user',
      PROJECT_CANCEL_LIMIT,
    ]);
    t.deepEqual(rows[0]?.outcome, { requested: runs, cancelledQueued: 100, more: false });
    const statements = plans();
    t.true(statements.length >= 4, `${statements.length} plans printed`);
    const indexes = await database.admin.query<{ name: string }>(
      `SELECT i.indexrelid::regclass::text AS name FROM pg_index AS i
        JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = 'runs'::regclass AND a.attname = 'id'`,
    );
    const byId = new Set(indexes.rows.map((row) => row.name));
    t.true(byId.has('runs_pkey'));
    t.deepEqual(
      statements.flatMap((explained) => pageSearches(explained.Plan, explained['Query Text'], byId)),
      [],
    );
  },
);

/**
 * Each node of `plan` that read more rows of the dispatch table in one execution than `most`,
 * counting those its filter dropped: a walk of the table, not a look-up of the page's rows by key.
 */
function dispatchReadsOver(plan: PlanNode, statement: string, most: number): string[] {
  const found: string[] = [];
  const onDispatches =
    plan['Relation Name'] === 'cancellation_dispatches' ||
    (plan['Index Name'] ?? '').startsWith('cancellation_dispatches');
  const read = (plan['Actual Rows'] ?? 0) + (plan['Rows Removed by Filter'] ?? 0);
  if (onDispatches && read > most)
    found.push(
      `${plan['Node Type']} ${plan['Index Name'] ?? ''} read ${read} rows in: ${statement.replace(/\s+/g, ' ').slice(0, 80)}`,
    );
  for (const child of plan.Plans ?? []) found.push(...dispatchReadsOver(child, statement, most));
  return found;
}

/** A claim item of a cancelled run: its active attempt, its cancel time and a fresh token. */
interface StopItem {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
  readonly token: string;
}

/** Every cancelled run of `projectId` in run-id order, as a replica would claim it (each with its own token). */
async function stopItemsOf(database: MigratedDatabase, projectId: string): Promise<StopItem[]> {
  const { rows } = await database.owner.query<{ runId: string; attemptId: string; at: string }>(
    `SELECT r.id AS "runId", a.id AS "attemptId", r.cancel_requested_at_ms AS at FROM runs AS r
      JOIN attempts AS a ON a.run_id = r.id WHERE r.project_id = $1 ORDER BY r.id`,
    [projectId],
  );
  return rows.map((row) => ({
    runId: row.runId,
    attemptId: row.attemptId,
    cancelRequestedAtMs: Number(row.at),
    token: createLeaseToken(),
  }));
}

/** The settle of `owner`'s claimed items: each stop recorded as requested, under the version its claim returned. */
function settlesOf(owner: string, items: readonly StopItem[], claims: readonly ClaimOutcome[]) {
  return items.flatMap((item, i) => {
    const claim = claims[i];
    if (claim?.kind !== 'claimed') return [];
    return [
      {
        runId: item.runId,
        attemptId: item.attemptId,
        owner,
        token: item.token,
        expectedVersion: claim.record.version,
        result: 'termination_requested' as const,
        eventId: `evt-settle-${owner}-${item.runId}`,
      },
    ];
  });
}

test.serial(
  'a stop page claims and settles its dispatch rows by key: with 950 other stops leased meanwhile, no statement walks the dispatch table, each reads at most the page’s rows and their previous versions (docs/decisions/0448)',
  async (t) => {
    const { database, world } = await ready;
    const runs = 1_000;
    const page = 50;
    await seed(world, 'proj-settle', runs, 0);
    // The statistics as autovacuum keeps them before a mass cancel: almost no dispatch row is leased.
    await database.owner.query('ANALYZE cancellation_dispatches');
    const { rows: cancelled } = await database.owner.query<{ outcome: { requested: number } }>(
      RUN_SQL.cancelProjectCall,
      ['proj-settle', 'user', PROJECT_CANCEL_LIMIT],
    );
    t.is(cancelled[0]?.outcome.requested, runs);
    const targets = await stopItemsOf(database, 'proj-settle');
    const itemsOf = (from: number): StopItem[] => targets.slice(from, from + page);
    // Other replicas' pages, claimed and not yet settled: 950 rows leased, as in a fleet's project cancel.
    const others = new PostgresDispatchRepository(world.pool);
    for (let from = page; from < runs; from += page)
      await others.claimPage({ owner: 'cp-other', leaseDurationMs: 600_000, items: itemsOf(from) });
    // This replica's page on one superuser connection, its statements' plans printed with the rows each node read.
    const explained = new Pool({ connectionString: adminUrlFor(database), max: 1 });
    t.teardown(() => explained.end());
    const client = await explained.connect();
    const plans = await explainEverything(client, { analyze: true });
    client.release();
    const mine = new PostgresDispatchRepository(explained);
    const items = itemsOf(0);
    const claims = await mine.claimPage({ owner: 'cp-mine', leaseDurationMs: 600_000, items });
    t.deepEqual(
      claims.map((claim) => claim.kind),
      items.map(() => 'claimed'),
    );
    const settled = await mine.recordResults(settlesOf('cp-mine', items, claims));
    t.deepEqual(
      settled.map((outcome) => outcome.kind),
      items.map(() => 'recorded'),
    );
    const statements = plans();
    t.true(statements.length >= 4, `${statements.length} plans printed`);
    t.deepEqual(
      // A look-up by key may also meet the previous version of a row this page's claim just updated.
      statements.flatMap((statement) => dispatchReadsOver(statement.Plan, statement['Query Text'], 2 * page)),
      [],
    );
  },
);

test.serial(
  'two replicas claim the same stop pages at once (same order, reversed, half-shared): each stop is claimed once and settled once, the other replica is answered leased, and a settle with its token is a stale fence (docs/decisions/0448)',
  async (t) => {
    const { database, world } = await ready;
    await seed(world, 'proj-two', 125, 0);
    await database.owner.query(RUN_SQL.cancelProjectCall, ['proj-two', 'user', PROJECT_CANCEL_LIMIT]);
    const other = new Pool({ connectionString: database.runtimeUrl, max: 4 });
    t.teardown(() => other.end());
    const replicas = [
      { owner: 'cp-a', repository: new PostgresDispatchRepository(world.pool) },
      { owner: 'cp-b', repository: new PostgresDispatchRepository(other) },
    ];
    const itemsA = await stopItemsOf(database, 'proj-two');
    const itemsB = await stopItemsOf(database, 'proj-two');
    // A: runs 0-49 and 50-99; B: runs 0-49 reversed and 75-124 reversed (25 shared with A's second page).
    const pages = [
      { replica: 0, items: itemsA.slice(0, 50) },
      { replica: 1, items: itemsB.slice(0, 50).reverse() },
      { replica: 0, items: itemsA.slice(50, 100) },
      { replica: 1, items: itemsB.slice(75, 125).reverse() },
    ];
    const claimed = await Promise.all(
      pages.map(({ replica, items }) => {
        const { owner, repository } = replicas[replica] as (typeof replicas)[number];
        return repository.claimPage({ owner, leaseDurationMs: 600_000, items });
      }),
    );
    const kindsByRun = new Map<string, string[]>();
    pages.forEach(({ items }, p) =>
      items.forEach((item, i) =>
        kindsByRun.set(item.runId, [...(kindsByRun.get(item.runId) ?? []), (claimed[p] as ClaimOutcome[])[i]!.kind]),
      ),
    );
    t.is(kindsByRun.size, 125);
    for (const [runId, kinds] of kindsByRun)
      t.deepEqual(
        kinds.sort(),
        kinds.length === 1 ? ['claimed'] : ['claimed', 'leased'],
        `${runId}: one claim, the other replica answered leased`,
      );
    // Each replica settles what it claimed; then B tries A's stops of the first page with its own token.
    const settled = await Promise.all(
      pages.map(({ replica, items }, p) => {
        const { owner, repository } = replicas[replica] as (typeof replicas)[number];
        const settles = settlesOf(owner, items, claimed[p] as ClaimOutcome[]);
        return settles.length === 0 ? Promise.resolve([]) : repository.recordResults(settles);
      }),
    );
    t.deepEqual([...new Set(settled.flat().map((outcome) => outcome.kind))], ['recorded']);
    t.is(settled.flat().length, 125, 'one settle per stop');
    const stale = await (replicas[1] as (typeof replicas)[number]).repository.recordResults(
      itemsB.slice(0, 50).map((item) => ({
        runId: item.runId,
        attemptId: item.attemptId,
        owner: 'cp-b',
        token: item.token,
        expectedVersion: 1,
        result: 'termination_requested' as const,
        eventId: `evt-stale-${item.runId}`,
      })),
    );
    t.deepEqual([...new Set(stale.map((outcome) => outcome.kind))], ['stale_fence']);
    const { rows } = await database.owner.query<{ status: string; count: number; n: number }>(
      `SELECT d.status, d.dispatch_count::int AS count, count(*)::int AS n FROM cancellation_dispatches AS d
        JOIN runs AS r ON r.id = d.run_id WHERE r.project_id = 'proj-two' GROUP BY 1, 2`,
    );
    t.deepEqual(rows, [{ status: 'dispatched', count: 1, n: 125 }]);
  },
);

test.serial(
  'a project cancel of 500 runs writes every run what the single cancel writes, in one transaction; a repeat changes nothing',
  async (t) => {
    const { database, world } = await ready;
    const project = 'proj-all';
    await grantStop(database, project);
    // The single cancel's references (another project; seeded first: a pull takes the oldest waiting
    // job), and what the project cancel must not touch: a run of the project cancelled before, one
    // that ended, and another project's runs.
    const runningRef = (await seed(world, 'proj-ref', 1, 0)).running[0] as string;
    const { running } = await seed(world, project, 400, 0);
    const queuedRef = (await seed(world, 'proj-ref', 0, 1)).queued[0] as string;
    const seeded = { running, queued: (await seed(world, project, 0, 100)).queued };
    await grantStop(database, 'proj-ref');
    const operator = await clientOf(OPERATOR);
    for (const runId of [runningRef, queuedRef])
      t.like(await operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200, body: { result: 'requested' } });
    const [pre, ended] = [seeded.running.shift() as string, seeded.queued.shift() as string];
    for (const runId of [pre, ended])
      t.like(await operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200, body: { result: 'requested' } });
    const untouched = [pre, ended, runningRef, queuedRef];
    const before = await snapshot(database, untouched);

    const reply = await operator.send('POST', `/v1/projects/${project}/cancel`);
    t.deepEqual(reply, { status: 200, body: { requested: 498, cancelledQueued: 99, more: false } });
    const all = [...seeded.running, ...seeded.queued];
    t.is(await writingTransactions(database, all), 1, 'every intent, event and dispatch row in one transaction');
    t.deepEqual(
      await snapshot(database, untouched),
      before,
      'runs cancelled before, ended or elsewhere are not touched',
    );
    for (const runId of all) t.is(await cancelEvents(world, runId), 1, `${runId}: one run.cancel_requested`);

    // Run by run, the single cancel's trace: the intent, its event, the pending dispatch; a queued job ended.
    t.like(await trace(world, database, runningRef), {
      status: 'running',
      reason: 'user',
      updatedAtLastEvent: true,
      dispatch: [{ status: 'pending', version: 0, dispatch_count: 0, due_at_cancel: true, written_at_cancel: true }],
    });
    t.like(await trace(world, database, queuedRef), { status: 'cancelled', dispatch: [] });
    const [runningTrace, queuedTrace] = [
      await trace(world, database, runningRef),
      await trace(world, database, queuedRef),
    ];
    for (const runId of seeded.running) t.deepEqual(await trace(world, database, runId), runningTrace, runId);
    for (const runId of seeded.queued) t.deepEqual(await trace(world, database, runId), queuedTrace, runId);

    const after = await snapshot(database, [...all, ...untouched]);
    t.deepEqual(await operator.send('POST', `/v1/projects/${project}/cancel`), {
      status: 200,
      body: { requested: 0, cancelledQueued: 0, more: false },
    });
    t.deepEqual(await snapshot(database, [...all, ...untouched]), after, 'a repeat writes nothing');
  },
);

test.serial(
  'the store sends a project cancel of 500 runs as one statement in one round trip, no BEGIN or COMMIT',
  async (t) => {
    const { database, world } = await ready;
    const seeded = await seed(world, 'proj-wire', 450, 50);
    const pool = new Pool({ connectionString: database.runtimeUrl, max: 1 });
    t.teardown(() => pool.end());
    const wire = tallyWire(pool);
    const store = new PostgresRunStore(pool);
    // The connection's once-only durability check (lib/store/postgres/transaction.ts) is not the cancel's.
    await store.getRun(seeded.running[0] as string);
    const before = { ...wire };
    t.deepEqual(await store.requestProjectCancellation({ projectId: 'proj-wire', reason: 'user' }), {
      requested: 500,
      cancelledQueued: 50,
      more: false,
    });
    t.deepEqual(wireSince(before, wire), { roundTrips: 1, statements: 1, transactionControl: 0 });
    t.is(await writingTransactions(database, [...seeded.running, ...seeded.queued]), 1);
  },
);

test.serial(
  'a project larger than one statement’s page answers more: true, and each repeat takes the next runs',
  async (t) => {
    const { database, world } = await ready;
    const projectId = 'proj-large';
    // Owner-seeded: running runs without an attempt (no dispatch to write), one more than a page holds.
    await database.owner.query(
      `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
     SELECT $1 || '-' || lpad(g::text, 5, '0'), $1, 'runtime', 'running', 0, NULL, NULL, 1, 1, 1 FROM generate_series(0, $2::int) AS g`,
      [projectId, PROJECT_CANCEL_LIMIT],
    );
    const cancel = () => world.runStore.requestProjectCancellation({ projectId, reason: 'user' });
    t.deepEqual(await cancel(), { requested: PROJECT_CANCEL_LIMIT, cancelledQueued: 0, more: true });
    t.deepEqual(await cancel(), { requested: 1, cancelledQueued: 0, more: false });
    t.deepEqual(await cancel(), { requested: 0, cancelledQueued: 0, more: false });
    const { rows } = await database.owner.query<{ runs: number; events: number }>(
      `SELECT count(*)::int AS runs, (SELECT count(*)::int FROM run_events WHERE run_id LIKE $1 || '-%') AS events
     FROM runs WHERE project_id = $1 AND cancel_requested_at_ms IS NOT NULL`,
      [projectId],
    );
    t.deepEqual(rows[0], { runs: PROJECT_CANCEL_LIMIT + 1, events: PROJECT_CANCEL_LIMIT + 1 });
  },
);

/**
 * Holds whichever transaction appends an event of `runId` for `seconds`, with that run locked: a
 * row trigger installed by the owner, removed by the returned function.
 */
async function slowEventOf(database: MigratedDatabase, runId: string, seconds: number): Promise<() => Promise<void>> {
  const name = `slow_${runId.replace(/[^a-z0-9]/g, '_')}`;
  await database.owner.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_sleep(${seconds}); RETURN NEW; END $$`);
  await database.owner.query(
    `CREATE TRIGGER ${name} BEFORE INSERT ON run_events FOR EACH ROW WHEN (NEW.run_id = '${runId}') EXECUTE FUNCTION ${name}()`,
  );
  return async () => {
    await database.owner.query(`DROP TRIGGER ${name} ON run_events`);
    await database.owner.query(`DROP FUNCTION ${name}()`);
  };
}

const sleeping = async (database: MigratedDatabase): Promise<boolean> =>
  (
    await database.admin.query(
      "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'",
    )
  ).rows.length > 0;

test.serial(
  'a single cancel that waits on the project cancel’s lock finds the intent written: one event (already_requested)',
  async (t) => {
    const { database, world } = await ready;
    const seeded = await seed(world, 'proj-race-a', 20, 0);
    const raced = seeded.running[0] as string;
    const restore = await slowEventOf(database, raced, 0.4);
    t.teardown(restore);
    const project = world.runStore.requestProjectCancellation({ projectId: 'proj-race-a', reason: 'user' });
    await until(() => sleeping(database), { what: 'the project cancel holding the run locks' });
    const single = await world.runStore.requestCancellation({ runId: raced, reason: 'user', eventId: 'evt-race-a' });
    t.is(single.kind, 'already_requested');
    t.like(await project, { requested: 20 });
    for (const runId of seeded.running) t.is(await cancelEvents(world, runId), 1, runId);
  },
);

test.serial(
  'a project cancel that waits on a single cancel’s lock leaves that run out: one event (the single cancel’s)',
  async (t) => {
    const { database, world } = await ready;
    const seeded = await seed(world, 'proj-race-b', 20, 0);
    const raced = seeded.running[7] as string;
    const restore = await slowEventOf(database, raced, 0.4);
    t.teardown(restore);
    const single = world.runStore.requestCancellation({ runId: raced, reason: 'user', eventId: 'evt-race-b' });
    await until(() => sleeping(database), { what: 'the single cancel holding its run lock' });
    const project = await world.runStore.requestProjectCancellation({ projectId: 'proj-race-b', reason: 'user' });
    t.deepEqual(project, { requested: 19, cancelledQueued: 0, more: false });
    t.is((await single).kind, 'requested');
    for (const runId of seeded.running) t.is(await cancelEvents(world, runId), 1, runId);
    t.deepEqual(
      (await world.runStore.listEvents(raced)).map((event) => event.id),
      ['evt-race-b'],
    );
  },
);

test.serial(
  'refused and malformed project cancels are typed and change nothing: no grant, an unknown project, a bad id or reason',
  async (t) => {
    const { database, world } = await ready;
    const project = 'proj-refused';
    await grantStop(database, project);
    const seeded = await seed(world, project, 3, 2);
    const all = [...seeded.running, ...seeded.queued];
    const before = await snapshot(database, all);
    const stranger = await clientOf('operator-stranger');
    const operator = await clientOf(OPERATOR);
    t.like(await stranger.send('POST', `/v1/projects/${project}/cancel`), {
      status: 403,
      body: { code: 'ERR_PIDFENCE_NOT_PERMITTED' },
    });
    t.like(await operator.send('POST', '/v1/projects/no-such-project/cancel'), {
      status: 403,
      body: { code: 'ERR_PIDFENCE_NOT_PERMITTED' },
    });
    const malformed = await operator.send<{ code: string }>('POST', `/v1/projects/${'p'.repeat(300)}/cancel`);
    t.is(malformed.status, 400);
    t.regex(malformed.body.code, /^ERR_PIDFENCE_/);
    const store = world.runStore;
    const bad: Array<[unknown, string]> = [
      [{ projectId: project, reason: 'whim' }, 'ERR_PIDFENCE_INVALID_CANCEL_REASON'],
      [{ projectId: '', reason: 'user' }, 'ERR_PIDFENCE_INVALID_ID'],
      [{ projectId: project, reason: 'user', limit: 5 }, 'ERR_PIDFENCE_INVALID_COMMAND'],
    ];
    for (const [command, code] of bad)
      await t.throwsAsync(store.requestProjectCancellation(command as never), { code });
    t.deepEqual(await snapshot(database, all), before);
  },
);
