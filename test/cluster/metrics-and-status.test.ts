// /metrics and the status page on the control plane (docs/decisions/0110-0112), over HTTPS with client
// certificates and a real PostgreSQL: prom-client is loaded only by a plane started with metrics; a
// real cancel delivered on a worker's tick moves the counters; the page answers each certificate's
// subject by its grants and never shows an owner, a token, a PID or a command.
import { request } from 'node:https';

import test from 'ava';

import { startControlPlane, type ControlPlane } from '../../lib/cluster/control-plane';
import { PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { labelProblems, parseExposition } from '../helpers/exposition';
import { makeCertificates, type Certificates, type Pem } from '../helpers/certificates';
import { clusterFixture } from './world';

const PROJECT = 'project-m';
const ready = clusterFixture('cluster_metrics');
let certificates: Certificates | undefined;
const planes: ControlPlane[] = [];
test.after.always(async () => {
  for (const plane of planes) await plane.close();
  certificates?.remove();
});

async function planeStarted(metrics?: { projects: string[] }): Promise<ControlPlane> {
  const { database } = await ready;
  certificates ??= makeCertificates();
  const plane = await startControlPlane({
    databaseUrl: database.runtimeUrl,
    tls: { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert },
    ...(metrics === undefined ? {} : { metrics }),
  });
  planes.push(plane);
  return plane;
}

interface Reply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
}

function send(plane: ControlPlane, pem: Pem, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, plane.url),
      {
        method,
        cert: pem.cert,
        key: pem.key,
        ca: (certificates as Certificates).ca.cert,
        minVersion: 'TLSv1.3',
        headers:
          payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const json = <T>(reply: Reply): T => JSON.parse(reply.text) as T;

async function grant(subject: string, permission: 'run.read' | 'run.stop'): Promise<void> {
  const { database } = await ready;
  await new PostgresGrantAdministration(database.owner).writeGrant(
    { subject, projectId: PROJECT, permission },
    'test-owner',
  );
}

const PROM_CLIENT = /[\\/]node_modules[\\/]prom-client[\\/]/;

test.serial(
  'a control plane without metrics loads no prom-client and has no /metrics; one with them does',
  async (t) => {
    const plain = await planeStarted();
    const certs = certificates as Certificates;
    const scraper = certs.client('prometheus');
    t.is((await send(plain, scraper, 'GET', '/metrics')).status, 404);
    t.false(
      Object.keys(require.cache).some((file) => PROM_CLIENT.test(file)),
      'prom-client is not loaded',
    );
    const metered = await planeStarted({ projects: [PROJECT] });
    t.true(Object.keys(require.cache).some((file) => PROM_CLIENT.test(file)));
    const scrape = await send(metered, scraper, 'GET', '/metrics');
    t.is(scrape.status, 200);
    t.regex(String(scrape.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    t.is(parseExposition(scrape.text).value('pidfence_metrics_store_up'), 1);
  },
);

test.serial(
  "a cancel delivered on a worker's tick moves the claim, result and claim+settle series; the gauges follow; no label holds a run id",
  async (t) => {
    const plane = await planeStarted({ projects: [PROJECT] });
    const certs = certificates as Certificates;
    const operator = certs.client('operator-m');
    const worker = certs.client('worker-m');
    const scraper = certs.client('prometheus');
    await grant('operator-m', 'run.stop');
    await grant('operator-m', 'run.read');
    const before = parseExposition((await send(plane, scraper, 'GET', '/metrics')).text);
    t.is(before.value('pidfence_dispatch_claims_total', { outcome: 'claimed' }), 0);

    t.is(
      (await send(plane, operator, 'POST', '/v1/jobs', { runId: 'run-m1', projectId: PROJECT, argv: ['sleep', '60'] }))
        .status,
      200,
    );
    const { sessionId } = json<{ sessionId: string }>(await send(plane, worker, 'POST', '/v1/sessions', {}));
    let assignment: { runId: string; attemptId: string; fence: number } | undefined;
    while (assignment?.runId !== 'run-m1') {
      const pulled = json<{ kind: string; assignment: { runId: string; attemptId: string; fence: number } }>(
        await send(plane, worker, 'POST', '/v1/assignments/pull', { sessionId }),
      );
      if (pulled.kind !== 'assigned') throw new Error(`pull: ${pulled.kind}`);
      assignment = pulled.assignment;
    }
    const { runId, attemptId, fence } = assignment;
    t.is((await send(plane, operator, 'POST', `/v1/runs/${runId}/cancel`)).status, 200);
    t.like(json(await send(plane, worker, 'POST', '/v1/lease-control', { sessionId, runId, attemptId, fence })), {
      kind: 'stop_requested',
      tracking: 'dispatched',
    });

    const scrape = await send(plane, scraper, 'GET', '/metrics');
    const after = parseExposition(scrape.text);
    t.is(after.value('pidfence_dispatch_claims_total', { outcome: 'claimed' }), 1);
    t.is(after.value('pidfence_dispatch_results_total', { result: 'termination_requested' }), 1);
    t.is(after.value('pidfence_dispatch_claim_settle_seconds_count'), 1);
    t.is(after.value('pidfence_dispatches', { project: PROJECT, state: 'dispatched' }), 1);
    t.deepEqual(labelProblems(after, [PROJECT]), []);
    for (const secret of [runId, attemptId, plane.replicaOwnerId, sessionId, 'worker-m', 'sleep'])
      t.false(scrape.text.includes(secret), `the text carries ${secret}`);
  },
);

test.serial(
  "the status page answers each certificate's subject by its grants; no script, no owner, token, PID or command",
  async (t) => {
    const plane = await planeStarted({ projects: [PROJECT] });
    const certs = certificates as Certificates;
    await grant('viewer-m', 'run.read');
    const viewer = certs.client('viewer-m');
    const stranger = certs.client('stranger-m');

    const card = await send(plane, viewer, 'GET', `/status/projects/${PROJECT}`);
    t.is(card.status, 200);
    t.regex(String(card.headers['content-type']), /^text\/html/);
    t.regex(String(card.headers['content-security-policy']), /default-src 'none'/);
    t.notRegex(card.text, /<script/i);
    t.regex(card.text, /data-fact="principal">viewer-m</);
    t.regex(card.text, /data-fact="state-dispatched">1</, 'the cancel of the test before is on the card');
    const run = await send(plane, viewer, 'GET', '/status/runs/run-m1');
    t.is(run.status, 200);
    t.regex(run.text, /data-fact="dispatch-status">dispatched</);
    t.regex(run.text, /data-fact="cancel-reason">user</);
    for (const page of [card, run]) {
      for (const secret of [plane.replicaOwnerId, 'sleep', 'worker-m', 'leaseOwner'])
        t.false(page.text.includes(secret), `the page shows ${secret}`);
      t.notRegex(page.text, /\b(pid|token|digest|handle|owner|argv)\b/i);
    }

    const refused = await send(plane, stranger, 'GET', `/status/projects/${PROJECT}`);
    t.is(refused.status, 403);
    t.regex(refused.text, /ERR_PIDFENCE_NOT_PERMITTED/);
    t.false(refused.text.includes('data-fact="state-'), 'no count reaches a stranger');
    t.is(
      (await send(plane, stranger, 'GET', '/status/runs/run-m1')).status,
      404,
      "another project's run looks missing (docs/decisions/0043)",
    );
    const form = await send(plane, viewer, 'GET', `/status?project=${PROJECT}`);
    t.is(form.status, 303);
    t.is(form.headers.location, `/status/projects/${PROJECT}`);
    const bad = await send(plane, viewer, 'GET', '/status/projects/has%20space');
    t.is(bad.status, 400);
    t.regex(bad.text, /ERR_PIDFENCE_INVALID_ID/);
    t.is((await send(plane, viewer, 'GET', '/status/nowhere/x')).status, 404);
  },
);

test.serial(
  "a worker session's lease page shows as its lease count and tick age, labelled by the session id only (docs/decisions/0204)",
  async (t) => {
    const plane = await planeStarted({ projects: [] });
    const certs = certificates as Certificates;
    const worker = certs.client('worker-session-m');
    const { sessionId } = json<{ sessionId: string }>(await send(plane, worker, 'POST', '/v1/sessions', {}));
    const runId = `run-session-m-${Date.now()}`;
    await grant('operator-session-m', 'run.stop');
    t.is(
      (
        await send(plane, certs.client('operator-session-m'), 'POST', '/v1/jobs', {
          runId,
          projectId: PROJECT,
          argv: ['sleep', '30'],
        })
      ).status,
      200,
    );
    const pulled = json<{ kind: string; assignments: Array<{ runId: string; attemptId: string; fence: number }> }>(
      await send(plane, worker, 'POST', '/v1/assignments/pull', { sessionId, max: 4 }),
    );
    t.is(pulled.kind, 'assigned');
    const leases = pulled.assignments.map(({ runId: id, attemptId, fence }) => ({ runId: id, attemptId, fence }));
    const page = json<{ session: string; expiresAtMs: number; answers: unknown[] }>(
      await send(plane, worker, 'POST', '/v1/workers/leases', { sessionId, leases, waitMs: 0 }),
    );
    t.like(page, { session: 'live', answers: [] });
    const text = (await send(plane, worker, 'GET', '/metrics')).text;
    const exposition = parseExposition(text);
    const mine = exposition.samples.filter((sample) => sample.labels.session === sessionId);
    t.deepEqual(mine.map((sample) => sample.name).sort(), [
      'pidfence_worker_session_leases',
      'pidfence_worker_session_tick_age_seconds',
    ]);
    t.is(mine.find((sample) => sample.name === 'pidfence_worker_session_leases')?.value, leases.length);
    t.true((mine.find((sample) => sample.name === 'pidfence_worker_session_tick_age_seconds')?.value ?? -1) >= 0);
    t.false(text.includes('worker-session-m'), "the worker's name is no label");
    t.deepEqual(labelProblems(exposition, []), []);
  },
);

test.serial(
  'a project-wide cancel needs run.stop; it ends queued runs at once and records the cancel intent of running ones (docs/decisions/0203)',
  async (t) => {
    const { world } = await ready;
    const plane = await planeStarted();
    const certs = certificates as Certificates;
    const project = `project-all-${Date.now()}`;
    const operator = certs.client('operator-all');
    const { database } = await ready;
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: 'operator-all', projectId: project, permission: 'run.stop' },
      'test-owner',
    );
    for (const i of [1, 2, 3])
      t.is(
        (
          await send(plane, operator, 'POST', '/v1/jobs', {
            runId: `${project}-${i}`,
            projectId: project,
            argv: ['sleep', '30'],
          })
        ).status,
        200,
      );
    const caller = { principal: 'worker-all', sessionId: await world.leases.registerSession('worker-all') };
    let running: string | undefined;
    while (running === undefined) {
      const pulled = await world.leases.pull(caller);
      if (pulled.kind !== 'assigned') throw new Error(`pull found ${pulled.kind}`);
      if (pulled.assignment.projectId === project) running = pulled.assignment.runId;
    }
    t.is((await send(plane, certs.client('nobody-all'), 'POST', `/v1/projects/${project}/cancel`)).status, 403);
    t.is((await world.runStore.getRun(running))?.cancelRequestedAtMs, null, 'a refused cancel changed nothing');
    const reply = await send(plane, operator, 'POST', `/v1/projects/${project}/cancel`);
    t.deepEqual(json(reply), { requested: 3, cancelledQueued: 2, more: false });
    for (const i of [1, 2, 3]) {
      const run = await world.runStore.getRun(`${project}-${i}`);
      t.is(run?.status, `${project}-${i}` === running ? 'running' : 'cancelled');
      t.not(run?.cancelRequestedAtMs, null);
    }
    t.deepEqual(json(await send(plane, operator, 'POST', `/v1/projects/${project}/cancel`)), {
      requested: 0,
      cancelledQueued: 0,
      more: false,
    });
  },
);
