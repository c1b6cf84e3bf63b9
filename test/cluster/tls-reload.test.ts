// Certificates and CRLs reload without a restart (issue 30 item 4; docs/decisions/0242): SIGHUP to a
// real `pidfence control-plane` or `pidfence worker` reads its files again. A revoked client
// certificate is refused at once, in the handshake on a new connection and with 403 on a keep-alive
// connection it opened before; a renewed server certificate is served; a bad file is refused with
// its code and the trust in force stays. Real openssl certificates and revocation lists.
import { copyFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { connect } from 'node:tls';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import type { Pem } from '../helpers/certificates';
import { until } from '../helpers/wait';
import { clusterFixture } from './world';
import { fleetWorld, hangUp } from './fleet-world';

const ready = clusterFixture('cluster_tls');
const PROJECT = 'project-tls';

/** The serial of the certificate a new TLS 1.3 connection is served, and whether a TLS 1.2 one is refused. */
function servedSerial(
  port: number,
  ca: string,
  pem: Pem,
  maxVersion: 'TLSv1.2' | 'TLSv1.3' = 'TLSv1.3',
): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca, cert: pem.cert, key: pem.key, maxVersion }, () => {
      resolve(socket.getPeerX509Certificate()?.serialNumber ?? 'none');
      socket.end();
    });
    socket.on('error', () => resolve('refused'));
  });
}

/** GET /v1/workers on a keep-alive agent: the status and the Connection header the server answered with. */
function workersOn(agent: Agent, url: string): Promise<{ status: number; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL('/v1/workers', url), { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.end();
  });
}

test.serial(
  'cluster: after a CRL is reloaded by SIGHUP, the control plane refuses the revoked certificate on its old keep-alive connection (403) and in a new handshake; other certificates, and the same name with a new certificate, go on',
  async (t) => {
    t.timeout(90_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { job: plane, url } = await fleet.plane(['--crl', fleet.certs.crlPath]);
    const leaked = fleet.certs.client('worker-tls');
    const renewed = fleet.certs.client('worker-tls');
    const other = fleet.certs.client('worker-tls-2');
    const clientOf = (pem: Pem): ControlPlaneClient => {
      const client = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert });
      t.teardown(() => client.close());
      return client;
    };
    const keptAlive = clientOf(leaked);
    t.like(await keptAlive.send('POST', '/v1/sessions', {}), { status: 200 });
    const otherAgent = new Agent({
      cert: other.cert,
      key: other.key,
      ca: fleet.certs.ca.cert,
      keepAlive: true,
      maxSockets: 1,
    });
    t.teardown(() => otherAgent.destroy());
    t.like(
      await workersOn(otherAgent, url),
      { status: 403, connection: 'keep-alive' },
      'no worker.read, but a kept connection',
    );

    fleet.certs.revoke(leaked);
    t.is(await hangUp(plane, 'control-plane'), 'pidfence control-plane: certificates reloaded');
    t.like(
      await keptAlive.send('POST', '/v1/sessions', {}),
      { status: 403, body: { code: 'ERR_PIDFENCE_CLUSTER_CERT_REVOKED' } },
      'refused on its connection from before the reload',
    );
    const fresh = clientOf(leaked);
    await t.throwsAsync(
      fresh.send('POST', '/v1/sessions', {}),
      { code: 'ERR_PIDFENCE_CLUSTER_UNREACHABLE' },
      'refused in the handshake of a new connection',
    );
    t.like(
      await workersOn(otherAgent, url),
      { status: 403, connection: 'close' },
      'a connection from before the reload is served once more, then closed',
    );
    t.like(
      await workersOn(otherAgent, url),
      { status: 403, connection: 'keep-alive' },
      'its new connection was made under the new trust',
    );
    t.like(await clientOf(other).send('POST', '/v1/sessions', {}), { status: 200 });
    t.like(
      await clientOf(renewed).send('POST', '/v1/sessions', {}),
      { status: 200 },
      'the name is not revoked, only that certificate',
    );
    t.like(await clientOf(other).send('GET', '/health'), { status: 200 });
  },
);

test.serial(
  'cluster: SIGHUP serves a renewed server certificate to new connections, keeps TLS 1.3 only, and refuses a bad file with its code, keeping the trust in force',
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { job: plane, url } = await fleet.plane(['--crl', fleet.certs.crlPath]);
    const port = Number(new URL(url).port);
    const pem = fleet.certs.client('operator-tls');
    const before = await servedSerial(port, fleet.certs.ca.cert, pem);
    t.regex(before, /^[0-9A-F]+$/);
    fleet.certs.renewServer();
    t.is(await hangUp(plane, 'control-plane'), 'pidfence control-plane: certificates reloaded');
    const after = await servedSerial(port, fleet.certs.ca.cert, pem);
    t.regex(after, /^[0-9A-F]+$/);
    t.not(after, before, 'the renewed certificate is served');
    t.is(
      await servedSerial(port, fleet.certs.ca.cert, pem, 'TLSv1.2'),
      'refused',
      'TLS 1.2 stays refused after a reload',
    );

    writeFileSync(fleet.certs.crlPath, 'not a CRL\n');
    t.regex(
      await hangUp(plane, 'control-plane'),
      /^pidfence control-plane: certificates not reloaded: the CRL file is not a PEM certificate revocation list.*\(ERR_PIDFENCE_CLUSTER_CRL_INVALID\)$/,
    );
    copyFileSync(fleet.certs.ca.keyPath, fleet.certs.server.keyPath); // a key that is not the certificate's
    writeFileSync(fleet.certs.crlPath, '');
    fleet.certs.revoke(fleet.certs.client('nobody')); // a good CRL again
    t.regex(
      await hangUp(plane, 'control-plane'),
      /certificates not reloaded: the certificate, key, CA or CRL cannot be used together.*\(ERR_PIDFENCE_CLUSTER_TLS_FILE\)$/,
    );
    t.is(await servedSerial(port, fleet.certs.ca.cert, pem), after, 'the trust in force is kept');
    t.is(plane.child.exitCode, null, 'a bad file never stops the control plane');
  },
);

test.serial(
  'cluster: a worker reloads its certificate on SIGHUP: once its old certificate is revoked, it goes on pulling with the new one',
  async (t) => {
    t.timeout(120_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { job: plane, url } = await fleet.plane(['--crl', fleet.certs.crlPath]);
    await fleet.grant('op-tls', PROJECT, 'run.stop');
    const operatorPem = fleet.certs.client('op-tls');
    const operator = new ControlPlaneClient(url, {
      cert: operatorPem.cert,
      key: operatorPem.key,
      ca: fleet.certs.ca.cert,
    });
    t.teardown(() => operator.close());
    const first = fleet.certs.client('worker-rot');
    // The worker reads its files at these paths; the rotation overwrites them as a certificate manager would.
    const certPath = path.join(fleet.scratch, 'worker.crt');
    const keyPath = path.join(fleet.scratch, 'worker.key');
    copyFileSync(first.certPath, certPath);
    copyFileSync(first.keyPath, keyPath);
    const worker = await fleet.worker(url, { ...first, certPath, keyPath });
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'tls-1', projectId: PROJECT, argv: ['true'] }), {
      status: 200,
    });
    await until(async () => (await world.runStore.getRun('tls-1'))?.status === 'succeeded', {
      what: 'tls-1 done',
      timeoutMs: 20_000,
      intervalMs: 100,
    });

    const second = fleet.certs.client('worker-rot');
    copyFileSync(second.certPath, certPath);
    copyFileSync(second.keyPath, keyPath);
    t.is(await hangUp(worker, 'worker'), 'pidfence worker: certificates reloaded');
    fleet.certs.revoke(first);
    t.is(await hangUp(plane, 'control-plane'), 'pidfence control-plane: certificates reloaded');
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'tls-2', projectId: PROJECT, argv: ['true'] }), {
      status: 200,
    });
    await until(async () => (await world.runStore.getRun('tls-2'))?.status === 'succeeded', {
      what: 'tls-2 pulled and done under the new certificate',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.false(
      worker.lines.some((line) => /revoked/.test(line)),
      'the worker was never refused',
    );

    writeFileSync(keyPath, 'garbage');
    t.regex(
      await hangUp(worker, 'worker'),
      /^pidfence worker: certificates not reloaded: .*\(ERR_PIDFENCE_CLUSTER_TLS_FILE\)$/,
    );
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'tls-3', projectId: PROJECT, argv: ['true'] }), {
      status: 200,
    });
    await until(async () => (await world.runStore.getRun('tls-3'))?.status === 'succeeded', {
      what: 'tls-3 done with the trust in force',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
  },
);

test.serial(
  "cluster: a worker given a CRL that revokes the control plane's certificate refuses to talk to it",
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    fleet.certs.revoke(fleet.certs.server);
    const pem = fleet.certs.client('worker-wary');
    const client = new ControlPlaneClient(url, {
      cert: pem.cert,
      key: pem.key,
      ca: fleet.certs.ca.cert,
      crl: (await import('node:fs')).readFileSync(fleet.certs.crlPath, 'utf8'),
    });
    t.teardown(() => client.close());
    await t.throwsAsync(client.send('POST', '/v1/sessions', {}), {
      code: 'ERR_PIDFENCE_CLUSTER_UNREACHABLE',
      message: /\(tls\)/,
    });
  },
);
