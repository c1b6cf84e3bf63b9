// A worker's attempt ends reported one page per request (docs/decisions/0432) on a real PostgreSQL,
// through control-plane replicas over HTTPS: each report of a page answered as /v1/completions
// answers it alone, the accepted ends in one transaction with one run.terminal event each, a bad page
// refused whole, two replicas answering one page at once, and a real `pidfence worker` whose N
// queued ends go out in ceil(N/64) requests.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';
import { Pool } from 'pg';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { startControlPlane, type ControlPlane } from '../../lib/cluster/control-plane';
import { ClusterLeaseStore, type Assignment } from '../../lib/cluster/index';
import { PostgresExecutionStore } from '../../lib/store/postgres/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import type { MigratedDatabase } from '../helpers/pg-store';
import { delay, until } from '../helpers/wait';
import { tallyWire, wireSince } from '../helpers/wire-tally';
import { fleetWorld, type FleetWorld } from './fleet-world';
import { clusterFixture, type ClusterWorld } from './world';

// Leases outlive a test: a lapsed session's runs would be marked unreachable (docs/decisions/0270).
const ready = clusterFixture('cluster_completion_page', 600_000);

const PAGE_ROUTE = '/v1/completions/page';
const SINGLE_ROUTE = '/v1/completions';

/** An in-process replica on the fleet's certificates (port 0: a free one), closed after the test. */
async function replicaOf(
  t: ExecutionContext,
  fleet: FleetWorld,
  database: MigratedDatabase,
  port = 0,
): Promise<ControlPlane> {
  const plane = await startControlPlane({
    databaseUrl: database.runtimeUrl,
    tls: { cert: fleet.certs.server.cert, key: fleet.certs.server.key, ca: fleet.certs.ca.cert },
    port,
  });
  t.teardown(() => plane.close());
  return plane;
}

function clientOf(t: ExecutionContext, fleet: FleetWorld, plane: ControlPlane, cn: string): ControlPlaneClient {
  const pem = fleet.certs.client(cn);
  const client = new ControlPlaneClient(plane.url, { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert });
  t.teardown(() => client.close());
  return client;
}

/** The report of a run that exited 0, for the lease `ref` (at `fence`, its own by default). */
function succeeded(ref: Assignment, fence = ref.fence) {
  return {
    runId: ref.runId,
    attemptId: ref.attemptId,
    fence,
    status: 'succeeded' as const,
    cause: 'receipt' as const,
    exit: { exitCode: 0, signal: null },
  };
}

async function terminalEvents(w: ClusterWorld, runId: string): Promise<number> {
  return (await w.eventTypes(runId)).filter((type) => type === 'run.terminal').length;
}

async function released(database: MigratedDatabase, runId: string): Promise<boolean> {
  const { rows } = await database.owner.query<{ releasedAtMs: string | null }>(
    'SELECT released_at_ms AS "releasedAtMs" FROM run_dispatch_leases WHERE run_id = $1',
    [runId],
  );
  return rows[0]?.releasedAtMs !== null;
}

/** A replica, a client with the certificate of `name` on it, and a session of that name holding `count` runs. */
async function sessionAt(t: ExecutionContext, name: string, count: number) {
  const { database, world } = await ready;
  const fleet = fleetWorld(t, database);
  const plane = await replicaOf(t, fleet, database);
  const worker = clientOf(t, fleet, plane, name);
  return { database, w: world, fleet, plane, worker, ...(await world.holding(count, name)) };
}

type PageAnswer = { runId: string; kind: string; code?: string };

test.serial(
  'cluster: one completion page answers each report as the single completion does (completed, stale fence lost, another session lost, forgotten refused with its code, already terminal); one run.terminal event each; only the accepted leases are released',
  async (t) => {
    const { database, w, plane, worker, caller, refs } = await sessionAt(t, 'worker-cp1', 3);
    const [done, stale, ended] = refs as [Assignment, Assignment, Assignment];
    const [otherSession] = (await w.holding(1, 'worker-cp1')).refs as [Assignment];
    const [forgotten] = (await w.holding(1, 'worker-cp1-gone')).refs as [Assignment];
    t.deepEqual(await w.leases.forgetWorker('worker-cp1-gone', 'test-operator'), {
      runsForgotten: 1,
      sessionsEnded: 1,
    });
    t.like(await w.leases.complete(caller, succeeded(ended)), { kind: 'completed' });
    const page = [succeeded(done), succeeded(stale, stale.fence - 1), succeeded(otherSession), succeeded(forgotten)];
    page.push(succeeded(ended));

    const reply = await worker.send<{ answers: PageAnswer[] }>('POST', PAGE_ROUTE, {
      sessionId: caller.sessionId,
      completions: page,
    });
    t.deepEqual(reply, {
      status: 200,
      body: {
        answers: [
          { runId: done.runId, kind: 'completed' },
          { runId: stale.runId, kind: 'lost' },
          { runId: otherSession.runId, kind: 'lost' },
          { runId: forgotten.runId, kind: 'refused', code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' },
          { runId: ended.runId, kind: 'already_terminal' },
        ],
      },
    });
    t.is(plane.requestsHandled(PAGE_ROUTE), 1, 'one request');
    // The single route gives the same answer for each report the page did not change.
    for (const [i, answer] of reply.body.answers.entries()) {
      if (i === 0) continue;
      const single = await worker.send<{ kind?: string; code?: string }>('POST', SINGLE_ROUTE, {
        sessionId: caller.sessionId,
        ...page[i],
      });
      t.deepEqual(
        answer.kind === 'refused'
          ? { status: single.status, code: single.body.code }
          : { status: single.status, kind: single.body.kind },
        answer.kind === 'refused' ? { status: 409, code: answer.code } : { status: 200, kind: answer.kind },
        `${answer.runId}: the single route's answer`,
      );
    }
    t.like(await w.runStore.getRun(done.runId), { status: 'succeeded' });
    for (const ref of [done, ended, forgotten]) t.is(await terminalEvents(w, ref.runId), 1, 'one run.terminal');
    for (const ref of [stale, otherSession]) {
      t.is((await w.runStore.getRun(ref.runId))?.status, 'running', 'a lost report ends nothing');
      t.deepEqual(await w.eventTypes(ref.runId), []);
      t.false(await released(database, ref.runId), 'and releases no lease');
    }
    t.true(await released(database, done.runId), 'the accepted lease is released');
    t.like(await w.runStore.getRun(forgotten.runId), { status: 'failed' }, "the operator's record is kept");
  },
);

test.serial(
  'cluster: a bad completion page (65 reports, a run twice, an unknown key, a bad status, none, a bad id, an exit code above 255) is a 400 with a stable code and changes nothing; a page under another name is lost for each report',
  async (t) => {
    const { database, w, fleet, plane, worker, caller, refs } = await sessionAt(t, 'worker-cp2', 2);
    const [ref, mate] = refs as [Assignment, Assignment];
    const good = succeeded(ref);
    const filler = Array.from({ length: 64 }, (_, i) => ({ ...succeeded(mate), runId: `run-cp2-filler-${i}` }));
    const bad: Array<[string, unknown[], string]> = [
      ['65 reports', [good, ...filler], 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST'],
      ['a run twice', [good, succeeded(mate), good], 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST'],
      ['an unknown key', [good, { ...succeeded(mate), pid: 1 }], 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST'],
      ['a bad status', [good, { ...succeeded(mate), status: 'running' }], 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST'],
      ['no report', [], 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST'],
      ['a bad id', [good, { ...succeeded(mate), runId: 'run 1' }], 'ERR_PIDFENCE_INVALID_ID'],
      [
        'an exit code above 255',
        [good, { ...succeeded(mate), exit: { exitCode: 300, signal: null } }],
        'ERR_PIDFENCE_INVALID_COMMAND',
      ],
    ];
    for (const [what, completions, code] of bad) {
      const reply = await worker.send<{ code: string; message?: string }>('POST', PAGE_ROUTE, {
        sessionId: caller.sessionId,
        completions,
      });
      t.is(`${reply.status} ${reply.body.code}`, `400 ${code}`, what);
      t.is(typeof reply.body.message, 'string', `${what}: the sentence says what to do`);
    }
    const stranger = clientOf(t, fleet, plane, 'worker-cp2-other');
    t.deepEqual(
      await stranger.send('POST', PAGE_ROUTE, { sessionId: caller.sessionId, completions: [good, succeeded(mate)] }),
      {
        status: 200,
        body: {
          answers: [
            { runId: ref.runId, kind: 'lost' },
            { runId: mate.runId, kind: 'lost' },
          ],
        },
      },
      "another name's certificate with this session: each report lost, as on /v1/completions",
    );
    for (const run of [ref, mate]) {
      t.is((await w.runStore.getRun(run.runId))?.status, 'running', 'nothing was written');
      t.deepEqual(await w.eventTypes(run.runId), []);
      t.false(await released(database, run.runId));
    }
    await t.throwsAsync(w.leases.completePage(caller, [good, { ...succeeded(mate), fence: 0 }]), {
      code: 'ERR_PIDFENCE_CLUSTER_INVALID_FENCE',
    });
    t.is((await w.runStore.getRun(ref.runId))?.status, 'running', 'the store refuses the whole page too');
  },
);

test.serial(
  'cluster: two replicas answering the same completion pages at once (a worker retried elsewhere), in the same and the reverse order, or sharing half their runs: each run completed exactly once, the other answer already_terminal, one run.terminal event each',
  async (t) => {
    const { database, world: w } = await ready;
    const fleet = fleetWorld(t, database);
    const planes = [await replicaOf(t, fleet, database), await replicaOf(t, fleet, database)];
    const [first, second] = planes.map((plane) => clientOf(t, fleet, plane, 'worker-cp3')) as [
      ControlPlaneClient,
      ControlPlaneClient,
    ];
    // The same page at both; reversed at the second; two pages that share 32 runs, one reversed.
    const rounds = [
      (page: unknown[]) => [page, page],
      (page: unknown[]) => [page, [...page].reverse()],
      (page: unknown[]) => [page.slice(0, 48), page.slice(16).reverse()],
    ];
    for (const [round, pagesOf] of rounds.entries()) {
      const { caller, refs } = await w.holding(64, 'worker-cp3');
      const [pageA, pageB] = pagesOf(refs.map((ref) => succeeded(ref)));
      const [a, b] = await Promise.all(
        [first, second].map((replica, i) =>
          replica.send<{ answers: PageAnswer[] }>('POST', PAGE_ROUTE, {
            sessionId: caller.sessionId,
            completions: i === 0 ? pageA : pageB,
          }),
        ),
      );
      t.is(a?.status, 200, JSON.stringify(a?.body));
      t.is(b?.status, 200, JSON.stringify(b?.body));
      const answers = [...(a?.body.answers ?? []), ...(b?.body.answers ?? [])];
      const completedBy = [a, b].map((reply) => reply?.body.answers.filter(({ kind }) => kind === 'completed').length);
      t.log(JSON.stringify({ round, completedBy }));
      for (const ref of refs) {
        const kinds = answers.filter(({ runId }) => runId === ref.runId).map(({ kind }) => kind);
        t.deepEqual(
          kinds.sort(),
          kinds.length === 2 ? ['already_terminal', 'completed'] : ['completed'],
          `${ref.runId}: completed once`,
        );
        t.is(await terminalEvents(w, ref.runId), 1, `${ref.runId}: one run.terminal event`);
        t.true(await released(database, ref.runId));
      }
    }
  },
);

test.serial(
  'cluster: a page of 64 ends costs PostgreSQL one read and two transactions (not three transactions per end) and under half the round trips of 64 single ends',
  async (t) => {
    const { database, world: w } = await ready;
    const pool = new Pool({ connectionString: database.runtimeUrl, max: 2 });
    t.teardown(() => pool.end());
    const tally = tallyWire(pool);
    const store = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: 600_000 });
    const costOf = async (work: () => Promise<unknown>) => {
      const before = { ...tally };
      await work();
      return wireSince(before, tally);
    };
    const one = await w.holding(1, 'worker-cp5');
    const single = await costOf(() => store.complete(one.caller, succeeded(one.refs[0] as Assignment)));
    const { caller, refs } = await w.holding(64, 'worker-cp5');
    const page = await costOf(() =>
      store.completePage(
        caller,
        refs.map((ref) => succeeded(ref)),
      ),
    );
    t.log(JSON.stringify({ single, page }));
    // transactionControl counts each transaction's BEGIN, SET LOCALs and COMMIT: the single end has three.
    t.is(page.transactionControl * 3, single.transactionControl * 2, 'two transactions: the ends, then the release');
    t.true(page.roundTrips < (64 * single.roundTrips) / 2, 'under half the round trips of 64 single ends');
    for (const ref of refs) t.is(await terminalEvents(w, ref.runId), 1);
  },
);

const WORKER_ENDS = 70;

test.serial(
  `cluster: a worker reports ${WORKER_ENDS} queued ends in ceil(${WORKER_ENDS}/64) = 2 requests, not one per end; each run ends once`,
  async (t) => {
    t.timeout(180_000);
    const { database, world: w } = await ready;
    const fleet = fleetWorld(t, database);
    let plane = await replicaOf(t, fleet, database);
    const journal = path.join(fleet.scratch, 'worker-cp4.db');
    await fleet.worker(plane.url, fleet.certs.client('worker-cp4'), [
      '--journal',
      journal,
      '--capacity',
      String(WORKER_ENDS),
    ]);
    const gate = path.join(fleet.scratch, 'gate');
    const runIds = Array.from({ length: WORKER_ENDS }, (_, i) => `run-cp4-${i}`);
    for (const runId of runIds)
      await w.leases.enqueueJob({
        runId,
        projectId: 'project-cp4',
        argv: ['sh', '-c', `while [ ! -e ${gate} ]; do sleep 0.1; done`],
      });
    const local = openSqliteStore(journal);
    t.teardown(() => local.close());
    const localStatus = async (runId: string) => (await local.runStore.getRun(runId))?.status;
    for (const runId of runIds)
      await until(async () => (await localStatus(runId)) === 'running', { timeoutMs: 60_000, what: `${runId} runs` });
    // The replica goes away, so every end queues at the worker; then it comes back on the same port.
    const { port } = plane;
    await plane.close();
    writeFileSync(gate, '');
    for (const runId of runIds)
      await until(async () => (await localStatus(runId)) === 'succeeded', { timeoutMs: 60_000, what: `${runId} ends` });
    await delay(500);
    plane = await replicaOf(t, fleet, database, port);
    for (const runId of runIds)
      await until(async () => (await w.runStore.getRun(runId))?.status === 'succeeded', {
        timeoutMs: 60_000,
        what: `${runId} reported`,
      });
    t.is(plane.requestsHandled(PAGE_ROUTE), Math.ceil(WORKER_ENDS / 64), 'one request per page of 64');
    t.is(plane.requestsHandled(SINGLE_ROUTE), 0, 'none one by one');
    for (const runId of runIds) t.is(await terminalEvents(w, runId), 1, `${runId}: one run.terminal event`);
  },
);
