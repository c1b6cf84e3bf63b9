// Revocation and sessions (issue 30 item 4; docs/decisions/0240): `pidfence worker revoke` is a deny
// list the control plane reads on every request, audited, ending the name's sessions at once; a
// revoked worker's requests get 403 with a typed code, cheaply (no write per refusal); the worker
// process stops pulling and keeps its jobs. The name is the certificate's CN, never the body's; a
// session id replayed under another certificate touches nothing. Real PostgreSQL, HTTPS, processes.
import { existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import type { Pem } from '../helpers/certificates';
import { clusterFixture } from './world';
import { fleetWorld, markingJob, type FleetWorld } from './fleet-world';
import { delay, until } from '../helpers/wait';

const ready = clusterFixture('cluster_revoke');
const PROJECT = 'project-rv';

function clientOf(t: import('ava').ExecutionContext, world: FleetWorld, url: string, pem: Pem): ControlPlaneClient {
  const client = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: world.certs.ca.cert });
  t.teardown(() => client.close());
  return client;
}

interface Tick {
  readonly status: number;
  readonly body: { readonly kind?: string; readonly code?: string; readonly sessionId?: string };
}

test.serial(
  "cluster: `pidfence worker revoke` refuses the name's next request with 403 ERR_PIDFENCE_WORKER_REVOKED and ends its sessions, audited; refusals in a loop write nothing; reinstate lifts it",
  async (t) => {
    t.timeout(90_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const admin = fleet.certs.client('fleet-admin');
    await fleet.grant('fleet-admin', '@cluster', 'worker.manage');
    await fleet.grant('op-rv', PROJECT, 'run.stop');
    const operator = clientOf(t, fleet, url, fleet.certs.client('op-rv'));
    const worker = clientOf(t, fleet, url, fleet.certs.client('worker-rv'));

    const {
      body: { sessionId },
    } = await worker.send<{ sessionId: string }>('POST', '/v1/sessions', {});
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'rv-1', projectId: PROJECT, argv: ['sleep', '60'] }), {
      status: 200,
    });
    const pulled = await worker.send<{ kind: string; assignment: { runId: string; attemptId: string; fence: number } }>(
      'POST',
      '/v1/assignments/pull',
      { sessionId },
    );
    t.is(pulled.body.kind, 'assigned');
    const lease = {
      sessionId,
      runId: pulled.body.assignment.runId,
      attemptId: pulled.body.assignment.attemptId,
      fence: pulled.body.assignment.fence,
    };
    t.like(await worker.send('POST', '/v1/lease-control', lease), { status: 200, body: { kind: 'renewed' } });

    const revoked = await fleet.cli(admin, ['worker', 'revoke', 'worker-rv', '--control-plane', url]);
    t.is(revoked.code, 0, revoked.stderr);
    t.regex(revoked.stdout, /worker worker-rv: revoked \(revoke: done, revision 1\)/);

    const refused = await worker.send<Tick['body']>('POST', '/v1/lease-control', lease);
    t.like(refused, { status: 403, body: { code: 'ERR_PIDFENCE_WORKER_REVOKED' } });
    const [session] = (
      await database.owner.query<{ endedAtMs: string | null; lastSeenAtMs: string }>(
        'SELECT ended_at_ms AS "endedAtMs", last_seen_at_ms AS "lastSeenAtMs" FROM worker_sessions WHERE id = $1',
        [sessionId],
      )
    ).rows;
    t.not(session?.endedAtMs, null, 'the revocation ended the session');
    const audit = await database.owner.query('SELECT action, actor, outcome FROM worker_audit WHERE worker_name = $1', [
      'worker-rv',
    ]);
    t.deepEqual(audit.rows, [{ action: 'revoke', actor: 'fleet-admin', outcome: 'changed' }]);

    // A revoked certificate retried in a loop: every request refused, none writes a row.
    const tables = async () =>
      (
        await database.owner
          .query(`SELECT (SELECT count(*) FROM worker_sessions) AS sessions, (SELECT count(*) FROM worker_audit) AS audit,
    (SELECT count(*) FROM cluster_workers) AS workers, (SELECT max(last_seen_at_ms) FROM worker_sessions) AS seen, (SELECT max(updated_at_ms) FROM cluster_workers) AS updated`)
      ).rows[0];
    const rowsBefore = await tables();
    for (let i = 0; i < 50; i++) {
      const reply = await worker.send<Tick['body']>(
        'POST',
        i % 2 === 0 ? '/v1/sessions' : '/v1/assignments/pull',
        i % 2 === 0 ? {} : { sessionId },
      );
      t.is(reply.status, 403);
      t.is(reply.body.code, 'ERR_PIDFENCE_WORKER_REVOKED');
    }
    t.deepEqual(await tables(), rowsBefore, 'no session, audit or worker row was written or touched by a refusal');
    t.is(
      (await world.runStore.getRun('rv-1'))?.cancelRequestedAtMs,
      null,
      'a revocation asks no stop (phase 2 decides what becomes of its runs)',
    );

    // Idempotent and audited again; reinstate lifts the deny list.
    t.regex(
      (await fleet.cli(admin, ['worker', 'revoke', 'worker-rv', '--control-plane', url])).stdout,
      /it was already so/,
    );
    const reinstated = await fleet.cli(admin, ['worker', 'reinstate', 'worker-rv', '--control-plane', url, '--json']);
    t.like(JSON.parse(reinstated.stdout), {
      name: 'worker-rv',
      action: 'reinstate',
      outcome: 'changed',
      state: 'active',
      revision: 2,
    });
    t.like(await worker.send('POST', '/v1/sessions', {}), { status: 200 });
    t.like(
      await worker.send('POST', '/v1/lease-control', lease),
      { status: 200, body: { kind: 'lost', reason: 'session' } },
      'the ended session stays ended',
    );
    t.deepEqual(
      (
        await database.owner.query(
          'SELECT action, outcome FROM worker_audit WHERE worker_name = $1 ORDER BY created_at_ms, action',
          ['worker-rv'],
        )
      ).rows
        .map((row) => `${row.action}:${row.outcome}`)
        .sort(),
      ['reinstate:changed', 'revoke:changed', 'revoke:unchanged'],
    );
  },
);

test.serial(
  'cluster: worker acts need worker.manage on @cluster, refuse unknown names and bad input with typed codes, and change nothing when refused',
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const viewer = fleet.certs.client('fleet-viewer');
    await fleet.grant('fleet-viewer', '@cluster', 'worker.read');
    const admin = fleet.certs.client('fleet-admin');
    const stranger = fleet.certs.client('stranger-rv');
    const worker = clientOf(t, fleet, url, fleet.certs.client('worker-rv2'));
    t.like(await worker.send('POST', '/v1/sessions', {}), { status: 200 });

    const denied = await fleet.cli(viewer, ['worker', 'revoke', 'worker-rv2', '--control-plane', url]);
    t.is(denied.code, 4);
    t.regex(
      denied.stderr,
      /fleet-viewer does not hold worker\.manage on project @cluster.*\(ERR_PIDFENCE_NOT_PERMITTED\)/,
    );
    t.is((await fleet.cli(stranger, ['workers', '--control-plane', url])).code, 4);
    const unknown = await fleet.cli(admin, ['worker', 'cordon', 'no-such-worker', '--control-plane', url]);
    t.is(unknown.code, 4);
    t.regex(unknown.stderr, /no worker named no-such-worker has registered.*\(ERR_PIDFENCE_WORKER_NOT_FOUND\)/);
    const badName = await fleet.cli(admin, ['worker', 'drain', 'bad name!', '--control-plane', url]);
    t.is(badName.code, 2);
    t.regex(badName.stderr, /a worker name is the subject CN of its certificate.*\nUsage: pidfence worker drain/);
    t.is((await fleet.cli(admin, ['worker', 'cordon', 'worker-rv2'])).code, 2, 'no control plane named');
    t.is(
      (
        await database.owner.query(
          "SELECT count(*)::int AS n FROM worker_audit WHERE worker_name IN ('worker-rv2', 'no-such-worker')",
        )
      ).rows[0]?.n,
      0,
      'a refused act is not audited',
    );
    t.is(
      (
        await database.owner.query(
          "SELECT count(*)::int AS n FROM cluster_workers WHERE name = 'worker-rv2' AND admission <> 'active'",
        )
      ).rows[0]?.n,
      0,
    );
    // A body naming a worker is refused by the schema: the name comes from the certificate only.
    t.like(await worker.send('POST', '/v1/workers/self', { version: '1.0.0', capacity: 2, name: 'worker-rv' }), {
      status: 400,
      body: { code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST' },
    });
    t.like(await worker.send('POST', '/v1/workers/self', { version: '1.0.0', capacity: 0 }), { status: 400 });
    t.like(await worker.send('POST', '/v1/workers/self', { version: '1.0.0', capacity: 2 }), {
      status: 200,
      body: { name: 'worker-rv2', admission: 'active' },
    });
  },
);

test.serial(
  "cluster: the worker's name is its certificate's CN, never the body's; a session id replayed under another certificate is lost and touches nothing; revoking the name refuses every certificate of it",
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    await fleet.grant('op-rv3', PROJECT, 'run.stop');
    const operator = clientOf(t, fleet, url, fleet.certs.client('op-rv3'));
    const owner = clientOf(t, fleet, url, fleet.certs.client('worker-rv3'));
    const other = clientOf(t, fleet, url, fleet.certs.client('worker-rv4'));
    const {
      body: { sessionId },
    } = await owner.send<{ sessionId: string }>('POST', '/v1/sessions', {});
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'rv-3', projectId: PROJECT, argv: ['sleep', '60'] }), {
      status: 200,
    });
    let assignment: { runId: string; attemptId: string; fence: number } | undefined;
    while (assignment?.runId !== 'rv-3') {
      const pulled = await owner.send<{
        kind: string;
        assignment: { runId: string; attemptId: string; fence: number };
      }>('POST', '/v1/assignments/pull', { sessionId });
      if (pulled.body.kind !== 'assigned') throw new Error(`pull: ${pulled.body.kind}`);
      assignment = pulled.body.assignment;
    }
    const lease = { sessionId, runId: assignment.runId, attemptId: assignment.attemptId, fence: assignment.fence };
    const facts = async () =>
      (
        await database.owner.query(
          `SELECT s.last_seen_at_ms AS seen, s.ended_at_ms AS ended, l.expires_at_ms AS expires, l.released_at_ms AS released
    FROM worker_sessions s JOIN run_dispatch_leases l ON l.session_id = s.id WHERE s.id = $1 AND l.run_id = 'rv-3'`,
          [sessionId],
        )
      ).rows[0];
    const before = await facts();
    await delay(20);
    t.like(await other.send('POST', '/v1/lease-control', lease), {
      status: 200,
      body: { kind: 'lost', reason: 'session' },
    });
    t.like(await other.send('POST', '/v1/assignments/pull', { sessionId }), {
      status: 200,
      body: { kind: 'session_closed' },
    });
    t.like(
      await other.send('POST', '/v1/completions', {
        ...lease,
        status: 'succeeded',
        cause: 'receipt',
        exit: { exitCode: 0, signal: null },
      }),
      { status: 200, body: { kind: 'lost' } },
    );
    t.like(await other.send('POST', '/v1/sessions/end', { sessionId }), { status: 200, body: { ended: false } });
    t.like(
      await other.send('POST', '/v1/lease-control', { ...lease, worker: 'worker-rv3' }),
      { status: 400, body: { code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST' } },
      'a body cannot name the worker',
    );
    t.deepEqual(await facts(), before, 'the replays renewed nothing, touched no heartbeat, ended nothing');
    t.like(
      await owner.send('POST', '/v1/lease-control', lease),
      { status: 200, body: { kind: 'renewed' } },
      'the owner keeps its lease',
    );

    // A second certificate issued for the same name (a leak, or a copy on a second host) is that
    // worker; revoking the name refuses both (the CRL refuses one certificate alone: tls-reload.test).
    const twin = clientOf(t, fleet, url, fleet.certs.client('worker-rv3'));
    t.like(
      await twin.send('POST', '/v1/lease-control', lease),
      { status: 200, body: { kind: 'renewed' } },
      'the same CN is the same worker',
    );
    const admin = fleet.certs.client('fleet-admin');
    t.is((await fleet.cli(admin, ['worker', 'revoke', 'worker-rv3', '--control-plane', url])).code, 0);
    for (const client of [owner, twin])
      t.like(await client.send('POST', '/v1/lease-control', lease), {
        status: 403,
        body: { code: 'ERR_PIDFENCE_WORKER_REVOKED' },
      });
    t.like(await other.send('POST', '/v1/sessions', {}), { status: 200 }, 'another name is untouched');
  },
);

test.serial('cluster: a revoked worker process stops pulling and keeps running the jobs it holds', async (t) => {
  t.timeout(120_000);
  const { database, world } = await ready;
  const fleet = fleetWorld(t, database);
  const { url } = await fleet.plane(['--worker-lease', '3s']);
  const admin = fleet.certs.client('fleet-admin');
  await fleet.grant('op-rv5', PROJECT, 'run.stop');
  const operator = clientOf(t, fleet, url, fleet.certs.client('op-rv5'));
  const worker = await fleet.worker(url, fleet.certs.client('worker-rv5'), ['--capacity', '2']);
  const marker = path.join(fleet.scratch, 'rv-5.term');
  t.like(await operator.send('POST', '/v1/jobs', { runId: 'rv-5', projectId: PROJECT, argv: markingJob(marker) }), {
    status: 200,
  });
  await until(async () => (await world.runStore.getRun('rv-5'))?.status === 'running', {
    what: 'rv-5 running',
    timeoutMs: 20_000,
    intervalMs: 100,
  });

  t.is((await fleet.cli(admin, ['worker', 'revoke', 'worker-rv5', '--control-plane', url])).code, 0);
  await worker.waitForLine(/refuses this worker as revoked; it pulls no more work and keeps the jobs it runs/, 10_000);
  t.like(await operator.send('POST', '/v1/jobs', { runId: 'rv-6', projectId: PROJECT, argv: ['true'] }), {
    status: 200,
  });
  await delay(2_000); // ten of its ticks
  t.is((await world.runStore.getRun('rv-6'))?.status, 'queued', 'the revoked worker pulled nothing');
  t.false(existsSync(marker), 'the job it held was not stopped');
  t.true(worker.child.exitCode === null, 'the worker process runs on');
  const refusals = (
    await database.owner.query(
      "SELECT count(*)::int AS n FROM worker_sessions WHERE principal = 'worker-rv5' AND ended_at_ms IS NULL",
    )
  ).rows[0]?.n;
  t.is(refusals, 0, 'its session was ended and no new one registered');
});
