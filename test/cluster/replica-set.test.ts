// The worker's replica set against real TLS sockets (docs/decisions/0202, 0396): a replica address
// that accepts connections and never answers, beside one that answers. The silent one costs one
// handshake bound, gets no request while it stays silent (only probes of /health), and is used
// again once it answers a probe.
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect, createServer, type Server, type Socket } from 'node:net';

import test, { type ExecutionContext } from 'ava';

import { ControlPlaneClient, HANDSHAKE_TIMEOUT_MS } from '../../lib/cluster/client';
import { ReplicaSet } from '../../lib/cluster/replica-set';
import { makeCertificates, type Certificates } from '../helpers/certificates';
import { delay, until } from '../helpers/wait';

/** A request budget far beyond the test's: a post that had to wait it out could not pass. */
const REQUEST_TIMEOUT_MS = 600_000;
const REST_MS = 200;

interface Answering {
  readonly server: HttpsServer;
  readonly paths: string[];
}

async function listen(server: Server | HttpsServer, port = 0): Promise<number> {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

function close(server: Server | HttpsServer): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A replica stand-in that answers every request 200 with its own name, and counts what it was asked. */
async function answering(t: ExecutionContext, certs: Certificates, name: string, port = 0) {
  const paths: string[] = [];
  const server = createHttpsServer(
    { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert, requestCert: true, rejectUnauthorized: true },
    (request, response) => {
      paths.push(request.url ?? '');
      request.resume();
      request.on('end', () => response.end(JSON.stringify({ name })));
    },
  );
  const bound = await listen(server, port);
  t.teardown(() => {
    server.closeAllConnections();
    return close(server);
  });
  return { answering: { server, paths } satisfies Answering, port: bound };
}

/** Accepts connections and never answers (a blackholed replica); counts the connections. */
async function silent(t: ExecutionContext) {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  const port = await listen(server);
  const stop = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy();
    await close(server);
  };
  t.teardown(() => (server.listening ? stop() : undefined));
  return { port, connections: () => connections, stop };
}

test.serial(
  'cluster: a replica address that accepts and never answers costs the worker one handshake bound; it gets probes, not requests, until it answers one',
  async (t) => {
    t.timeout(60_000);
    const certs = makeCertificates();
    t.teardown(() => certs.remove());
    const blackhole = await silent(t);
    const healthy = await answering(t, certs, 'healthy');
    const pem = certs.client('worker-r');
    const replicas = new ReplicaSet(
      [`https://127.0.0.1:${blackhole.port}`, `https://127.0.0.1:${healthy.port}`],
      { cert: pem.cert, key: pem.key, ca: certs.ca.cert },
      { restMs: REST_MS },
    );
    t.teardown(() => replicas.close());

    // The first post meets the silent address first: its handshake bound, not the request's timeout, ends it.
    const first = await replicas.post<{ name: string }>('/v1/x', {}, REQUEST_TIMEOUT_MS);
    t.deepEqual(first, { status: 200, body: { name: 'healthy' } });
    t.is(blackhole.connections(), 1);
    t.is(replicas.resting(), 1);

    // Over several rests every post is answered by the healthy replica; the silent one only gets probes.
    for (let i = 0; i < 12; i++) {
      t.like(await replicas.post('/v1/x', {}, REQUEST_TIMEOUT_MS), { status: 200, body: { name: 'healthy' } });
      await delay(REST_MS / 2);
    }
    t.is(healthy.answering.paths.filter((p) => p === '/v1/x').length, 13);
    t.true(blackhole.connections() >= 2, 'the silent replica was probed again after its rest');
    t.is(replicas.resting(), 1);

    // It answers again: a probe of /health brings it back, and it takes its turn.
    await blackhole.stop();
    const recovered = await answering(t, certs, 'recovered', blackhole.port);
    // Probes start from the worker's own requests (no timer of the set's): it goes on posting meanwhile.
    await until(
      async () => {
        await replicas.post('/v1/x', {});
        return replicas.resting() === 0;
      },
      { what: 'the replica back after a probe', timeoutMs: 10_000, intervalMs: REST_MS / 2 },
    );
    t.true(recovered.answering.paths.includes('/health'), 'a probe of /health brought it back');
    const names: string[] = [];
    for (let i = 0; i < 4; i++) names.push((await replicas.post<{ name: string }>('/v1/x', {})).body.name);
    t.deepEqual([...new Set(names)].sort(), ['healthy', 'recovered']);
  },
);

/** Forwards each connection to `port` only after `delayMs`: a control plane too loaded to shake hands at once. */
async function slowToShakeHands(t: ExecutionContext, port: number, delayMs: number): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.pause();
    client.on('error', () => undefined);
    setTimeout(() => {
      const upstream = connect(port, '127.0.0.1', () => {
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
    }, delayMs);
  });
  const bound = await listen(server);
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return close(server);
  });
  return bound;
}

test.serial(
  'cluster: a control plane slow to shake hands (3 s) is still reached by an operator and by a worker whose only replica it is',
  async (t) => {
    t.timeout(60_000);
    const certs = makeCertificates();
    t.teardown(() => certs.remove());
    const healthy = await answering(t, certs, 'slow');
    const slowPort = await slowToShakeHands(t, healthy.port, HANDSHAKE_TIMEOUT_MS + 1_000);
    const pem = certs.client('worker-s');
    const tls = { cert: pem.cert, key: pem.key, ca: certs.ca.cert };
    const url = `https://127.0.0.1:${slowPort}`;
    // The operator's client has no handshake bound: only the request's own timeout.
    const operator = new ControlPlaneClient(url, tls);
    t.teardown(() => operator.close());
    t.like(await operator.send('POST', '/v1/x', {}, 20_000), { status: 200, body: { name: 'slow' } });
    // The worker's bounded handshake runs out, then the same replica is tried with the whole timeout.
    const replicas = new ReplicaSet([url], tls);
    t.teardown(() => replicas.close());
    t.like(await replicas.post('/v1/x', {}, 20_000), { status: 200, body: { name: 'slow' } });
    t.is(replicas.resting(), 0, 'it answered, so it is not resting');
  },
);
