// The control plane over HTTPS (docs/decisions/0102): TLS 1.3 with required client certificates
// from the cluster CA, refusal before any handler, the subject CN as principal, health and
// readiness, the worker endpoints and the management plane behind grants; real PostgreSQL.
import { connect } from 'node:tls';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { startControlPlane, type ControlPlane } from '../../lib/cluster/control-plane';
import { validateId } from '../../lib/contract/index';
import { PostgresDispatchRepository, PostgresGrantAdministration } from '../../lib/store/postgres/index';
import type { MigratedDatabase } from '../helpers/pg-store';
import { makeCertificates, type Certificates } from '../helpers/certificates';
import { clusterFixture, foreignDispatch } from './world';

const ready = clusterFixture('cluster_plane');
let certificates: Certificates | undefined;
let plane: ControlPlane | undefined;
const started = ready.then(async ({ database }) => {
  certificates = makeCertificates();
  plane = await startControlPlane({
    databaseUrl: database.runtimeUrl,
    tls: { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert },
  });
  return { database, certificates, plane };
});
started.catch(() => undefined);
test.after.always(async () => {
  await plane?.close();
  certificates?.remove();
});

/** Grants are written by the migration owner (docs/decisions/0040). */
async function grant(database: MigratedDatabase, subject: string, permission: 'run.read' | 'run.stop'): Promise<void> {
  await new PostgresGrantAdministration(database.owner).writeGrant(
    { subject, projectId: 'project-h', permission },
    'test-owner',
  );
}

function clientFor(
  t: import('ava').ExecutionContext,
  cn: string,
  signer?: import('../helpers/certificates').Pem,
): ControlPlaneClient {
  const certs = certificates as Certificates;
  const pem = certs.client(cn, signer);
  const client = new ControlPlaneClient((plane as ControlPlane).url, {
    cert: pem.cert,
    key: pem.key,
    ca: certs.ca.cert,
  });
  t.teardown(() => client.close());
  return client;
}

test.serial(
  'cluster: no client certificate, or one from a foreign CA, is refused in the handshake; nothing reaches a handler',
  async (t) => {
    const { certificates: certs, plane: cp } = await started;
    const bare = await new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: cp.port, ca: certs.ca.cert, minVersion: 'TLSv1.3' }, () => {
        socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      socket.on('error', (error: Error & { code?: string }) => resolve(`error:${error.code ?? error.message}`));
      socket.on('close', () => resolve(text === '' ? 'closed' : text));
    });
    t.notRegex(bare, /200|status/, 'no HTTP reply without a certificate');
    const foreign = clientFor(t, 'worker-x', certs.foreignCa);
    await t.throwsAsync(foreign.send('GET', '/health'), { code: 'ERR_PIDFENCE_CLUSTER_UNREACHABLE' });
    await t.throwsAsync(foreign.send('POST', '/v1/sessions', {}), { code: 'ERR_PIDFENCE_CLUSTER_UNREACHABLE' });
    t.is(cp.requestsHandled(), 0, 'no request reached Fastify');
  },
);

test.serial('cluster: TLS 1.2 is refused; a client of the cluster CA gets health and readiness', async (t) => {
  const { certificates: certs, plane: cp } = await started;
  const pem = certs.client('worker-tls12');
  const outcome = await new Promise<string>((resolve) => {
    const socket = connect(
      { host: '127.0.0.1', port: cp.port, ca: certs.ca.cert, cert: pem.cert, key: pem.key, maxVersion: 'TLSv1.2' },
      () => resolve('connected'),
    );
    socket.on('error', () => resolve('refused'));
  });
  t.is(outcome, 'refused');
  const client = clientFor(t, 'worker-a');
  t.deepEqual(await client.send('GET', '/health'), { status: 200, body: { status: 'ok' } });
  t.deepEqual(await client.send('GET', '/ready'), { status: 200, body: { ready: true } });
});

test.serial(
  'cluster: the subject CN is the principal; a job enqueued by an operator with run.stop is pulled, ticked and completed over HTTPS',
  async (t) => {
    const { database, plane: cp } = await started;
    await grant(database, 'operator-1', 'run.stop');
    const operator = clientFor(t, 'operator-1');
    const worker = clientFor(t, 'worker-a');
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'run-h1', projectId: 'project-h', argv: ['true'] }), {
      status: 200,
      body: { result: 'created' },
    });
    const session = await worker.send<{ sessionId: string }>('POST', '/v1/sessions', {});
    const sessionId = session.body.sessionId;
    const pulled = await worker.send<{ kind: string; assignment: { runId: string; attemptId: string; fence: number } }>(
      'POST',
      '/v1/assignments/pull',
      { sessionId },
    );
    t.is(pulled.body.kind, 'assigned');
    const { runId, attemptId, fence } = pulled.body.assignment;
    t.like(await worker.send('POST', '/v1/lease-control', { sessionId, runId, attemptId, fence }), {
      status: 200,
      body: { kind: 'renewed' },
    });
    const impostor = clientFor(t, 'worker-b');
    t.like(await impostor.send('POST', '/v1/lease-control', { sessionId, runId, attemptId, fence }), {
      status: 200,
      body: { kind: 'lost', reason: 'session' },
    });
    t.like(
      await worker.send('POST', '/v1/completions', {
        sessionId,
        runId,
        attemptId,
        fence,
        status: 'succeeded',
        cause: 'receipt',
        exit: { exitCode: 0, signal: null },
      }),
      { status: 200, body: { kind: 'completed' } },
    );
    t.is(cp.replicaOwnerId.startsWith('cp-'), true);
  },
);

test.serial(
  'cluster: an operator without run.stop can neither enqueue, cancel nor rearm; bad bodies are refused by the schema',
  async (t) => {
    const { database, world } = await ready;
    await grant(database, 'viewer-1', 'run.read');
    await grant(database, 'operator-2', 'run.stop');
    await grant(database, 'operator-2', 'run.read'); // acting on a run needs seeing it (docs/decisions/0043)
    const viewer = clientFor(t, 'viewer-1');
    const operator = clientFor(t, 'operator-2');
    t.like(
      await operator.send('POST', '/v1/jobs', { runId: 'run-h2', projectId: 'project-h', argv: ['sleep', '60'] }),
      { status: 200 },
    );
    t.like(await viewer.send('POST', '/v1/jobs', { runId: 'run-h3', projectId: 'project-h', argv: ['true'] }), {
      status: 403,
      body: { code: 'ERR_PIDFENCE_NOT_PERMITTED' },
    });
    t.like(await viewer.send('POST', '/v1/runs/run-h2/cancel'), {
      status: 403,
      body: { code: 'ERR_PIDFENCE_NOT_PERMITTED' },
    });
    t.is((await world.runStore.getRun('run-h2'))?.cancelRequestedAtMs, null, 'the refused cancel changed nothing');

    // A blocked dispatch on run-h2: a worker holds it, the operator cancels, a foreign owner blocks it.
    const sessionId = await world.leases.registerSession('worker-c');
    const pulled = await world.leases.pull({ principal: 'worker-c', sessionId });
    if (pulled.kind !== 'assigned' || pulled.assignment.runId !== 'run-h2') throw new Error('run-h2 was not pulled');
    t.like(await operator.send('POST', '/v1/runs/run-h2/cancel'), { status: 200, body: { result: 'requested' } });
    const cancelledAt = (await world.runStore.getRun('run-h2'))?.cancelRequestedAtMs ?? 0;
    await foreignDispatch(
      new PostgresDispatchRepository(world.pool),
      pulled.assignment,
      cancelledAt,
      'identity_mismatch',
    );
    const inspected = await viewer.send<{ version: number }>('GET', '/v1/runs/run-h2/dispatch');
    t.like(inspected, { status: 200, body: { status: 'blocked' } });
    const expectation = {
      expectedVersion: inspected.body.version,
      expectedStatus: 'blocked',
      expectedResult: 'identity_mismatch',
    };
    t.like(await viewer.send('POST', '/v1/runs/run-h2/rearm', expectation), {
      status: 403,
      body: { code: 'ERR_PIDFENCE_NOT_PERMITTED' },
    });
    t.like(await viewer.send('GET', '/v1/runs/run-h2/dispatch'), { status: 200, body: { status: 'blocked' } });
    t.like(await operator.send('POST', '/v1/runs/run-h2/rearm', expectation), {
      status: 200,
      body: { status: 'retry_wait' },
    });
    t.like(await viewer.send('GET', '/v1/projects/project-h/status'), { status: 200 });
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'run-h4', projectId: 'project-h', argv: [], extra: 1 }), {
      status: 400,
      body: { code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST' },
    });
  },
);

test.serial(
  'cluster: POST /v1/jobs takes an optional run name, stored with the run; a bad name is bad input and enqueues nothing',
  async (t) => {
    const { database, world } = await ready;
    await grant(database, 'operator-3', 'run.stop');
    const operator = clientFor(t, 'operator-3');
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'run-h-named',
        projectId: 'project-h',
        argv: ['true'],
        name: 'report.daily',
      }),
      { status: 200, body: { result: 'created' } },
    );
    const [named] = (await database.owner.query('SELECT name FROM runs WHERE id = $1', ['run-h-named'])).rows as Array<{
      name: string | null;
    }>;
    t.is(named?.name, 'report.daily');
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'run-h-badname',
        projectId: 'project-h',
        argv: ['true'],
        name: 'two words',
      }),
      { status: 400, body: { code: 'ERR_PIDFENCE_INVALID_RUN_NAME' } },
    );
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'run-h-longname',
        projectId: 'project-h',
        argv: ['true'],
        name: 'x'.repeat(65),
      }),
      { status: 400, body: { code: 'ERR_PIDFENCE_INVALID_RUN_NAME' } },
    );
    t.is(await world.runStore.getRun('run-h-badname'), null, 'nothing was enqueued');
    t.is(await world.runStore.getRun('run-h-longname'), null);
  },
);

test.serial(
  'cluster: a cancel answers with the codes of the CLI: a finished run is 409 ERR_PIDFENCE_RUN_FINISHED, a missing or unreadable run 404 ERR_PIDFENCE_RUN_NOT_FOUND (docs/decisions/0224)',
  async (t) => {
    const { database } = await started;
    await grant(database, 'operator-3', 'run.stop');
    await grant(database, 'operator-3', 'run.read');
    const operator = clientFor(t, 'operator-3');
    // run-h1 was completed by its worker above.
    t.is((await (await ready).world.runStore.getRun('run-h1'))?.status, 'succeeded');
    t.like(await operator.send('POST', '/v1/runs/run-h1/cancel'), {
      status: 409,
      body: { code: 'ERR_PIDFENCE_RUN_FINISHED', message: 'run run-h1 has already finished; nothing to cancel.' },
    });
    t.like(await operator.send('POST', '/v1/runs/run-nowhere/cancel'), {
      status: 404,
      body: { code: 'ERR_PIDFENCE_RUN_NOT_FOUND' },
    });
    // Without run.read the run is not there for the caller, as from the CLI (docs/decisions/0043).
    t.like(await clientFor(t, 'stranger-1').send('POST', '/v1/runs/run-h1/cancel'), {
      status: 404,
      body: { code: 'ERR_PIDFENCE_RUN_NOT_FOUND' },
    });
  },
);

/** Ids at and around the contract's rule (docs/decisions/0260): lengths, first characters, the allowed set and its neighbours. */
const ID_TABLE = [
  'run-1',
  'a',
  '9',
  'A.b_c:d-e',
  'r'.repeat(128),
  'r'.repeat(129),
  '',
  ' run',
  'run 1',
  'run/1',
  '-run',
  '.run',
  ':run',
  'run\n',
  'r\u00fcn',
  'run@x',
  'run%41',
  'run;1',
  'run\u0000',
];

test.serial(
  "cluster: an id is valid on the HTTP surface exactly when the contract says so, and refused with the contract's code (docs/decisions/0260)",
  async (t) => {
    const { database } = await started;
    await grant(database, 'viewer-ids', 'run.read');
    const viewer = clientFor(t, 'viewer-ids');
    for (const id of ID_TABLE) {
      let contract = 'valid';
      try {
        validateId(id, 'runId');
      } catch (error) {
        contract = (error as { code: string }).code;
      }
      // A valid id reaches the handler: no run.stop (403) on a job, no such run (404) on a read.
      const job = await viewer.send<{ code: string }>('POST', '/v1/jobs', {
        runId: id,
        projectId: 'project-h',
        argv: ['true'],
      });
      t.is(
        job.status === 403 ? 'valid' : `${job.status} ${job.body.code}`,
        contract === 'valid' ? 'valid' : `400 ${contract}`,
        `runId ${JSON.stringify(id)} in a body`,
      );
      const project = await viewer.send<{ code: string }>('POST', '/v1/jobs', {
        runId: 'run-ids',
        projectId: id,
        argv: ['true'],
      });
      t.is(
        project.status === 403 ? 'valid' : `${project.status} ${project.body.code}`,
        contract === 'valid' ? 'valid' : `400 ${contract}`,
        `projectId ${JSON.stringify(id)} in a body`,
      );
      if (id === '') continue; // an empty path segment names another route
      const read = await viewer.send<{ code: string }>('GET', `/v1/runs/${encodeURIComponent(id)}`);
      t.is(
        read.status === 404 && read.body.code === 'ERR_PIDFENCE_RUN_NOT_FOUND'
          ? 'valid'
          : `${read.status} ${read.body.code}`,
        contract === 'valid' ? 'valid' : `400 ${contract}`,
        `runId ${JSON.stringify(id)} in a path`,
      );
    }
  },
);
