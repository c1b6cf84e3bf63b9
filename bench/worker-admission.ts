// What the fleet's hold costs each worker request (issue 30 item 4; docs/decisions/0240). Not a test.
// 1. From the wire: the hold read every request pays (the deny list and the cordon), a revoked
//    worker's refusal, and a renewal tick beside them, in round trips, statements and writes.
// 2. Over HTTPS with mutual TLS on one keep-alive connection: GET /health (no check, the floor), a
//    revoked worker's request refused, and an active worker's renewal tick; median and p99 per request,
//    and ratios against the renewal a refusal replaces.
// Run: npm run bench:admission (PIDFENCE_BENCH_RUNS, default 1000)
import type { EventEmitter } from 'node:events';

import { Pool } from 'pg';

import { ClusterLeaseStore, ControlPlaneClient, startControlPlane } from '../lib/cluster/index';
import { FleetControl } from '../lib/cluster/fleet';
import {
  PostgresExecutionStore,
  PostgresGrantAdministration,
  PostgresManagementStore,
  PostgresRunStore,
} from '../lib/store/postgres/index';
import { makeCertificates } from '../test/helpers/certificates';
import { withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { tallyWire, wireSince, type WireTally } from '../test/helpers/wire-tally';

const RUNS = Number(process.env.PIDFENCE_BENCH_RUNS ?? 1_000);
const COST_RUNS = 50;

/** Statements that wrote: INSERT, UPDATE or DELETE command tags, on every connection of `pool`. */
function tallyWrites(pool: Pool): { writes: number } {
  const tally = { writes: 0 };
  pool.on('connect', (client) => {
    (client as unknown as { connection: EventEmitter }).connection.on(
      'commandComplete',
      (message: { text?: string }) => {
        if (/^(INSERT|UPDATE|DELETE)\b/.test(message.text ?? '')) tally.writes += 1;
      },
    );
  });
  return tally;
}

interface Cost {
  readonly name: string;
  readonly wire: WireTally;
  readonly writes: number;
}

async function wireCosts(runtimeUrl: string): Promise<Cost[]> {
  const pool = new Pool({ connectionString: runtimeUrl, max: 1 });
  const wire = tallyWire(pool);
  const written = tallyWrites(pool);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: 60_000 });
  const fleet = new FleetControl(pool, new PostgresManagementStore(pool), new PostgresRunStore(pool));
  const caller = { principal: 'bench-active', sessionId: await leases.registerSession('bench-active') };
  await leases.enqueueJob({ runId: 'admission-cost', projectId: 'bench', argv: ['true'] });
  const pulled = await leases.pull(caller);
  if (pulled.kind !== 'assigned') throw new Error('no assignment');
  await leases.registerSession('bench-revoked');
  await fleet.act('bench-admin', 'bench-revoked', 'revoke');
  const measure = async (name: string, work: () => Promise<unknown>): Promise<Cost> => {
    await work().catch(() => undefined); // warm-up: the named statement is prepared once per connection
    const before = { ...wire };
    const writesBefore = written.writes;
    for (let i = 0; i < COST_RUNS; i++) await work().catch(() => undefined);
    const spent = wireSince(before, wire);
    return {
      name,
      wire: {
        roundTrips: spent.roundTrips / COST_RUNS,
        statements: spent.statements / COST_RUNS,
        transactionControl: spent.transactionControl / COST_RUNS,
      },
      writes: (written.writes - writesBefore) / COST_RUNS,
    };
  };
  try {
    return [
      await measure("renewal tick (the lease store's transaction)", () => leases.tick(caller, pulled.assignment)),
      await measure('hold read, every worker request (deny list, cordon)', () => fleet.admit('bench-active')),
      await measure("revoked worker's request: the hold read, refused", () => fleet.admit('bench-revoked')),
    ];
  } finally {
    await pool.end();
  }
}

async function timedRequests(
  client: ControlPlaneClient,
  path: string,
  body: unknown,
  method: 'GET' | 'POST',
  expect: number,
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = -20; i < RUNS; i++) {
    const started = process.hrtime.bigint();
    const reply = await client.send(method, path, body);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (reply.status !== expect) throw new Error(`${path}: ${reply.status}, expected ${expect}`);
    if (i >= 0) samples.push(ms);
  }
  return samples;
}

async function httpLatencies(db: {
  runtimeUrl: string;
  owner: Pool;
}): Promise<Array<{ name: string; samples: number[] }>> {
  const certs = makeCertificates();
  const plane = await startControlPlane({
    databaseUrl: db.runtimeUrl,
    tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert },
    workerLeaseMs: 60_000,
  });
  const clientOf = (cn: string): ControlPlaneClient => {
    const pem = certs.client(cn);
    return new ControlPlaneClient(plane.url, { cert: pem.cert, key: pem.key, ca: certs.ca.cert });
  };
  const [active, revoked, operator, admin] = [
    clientOf('http-active'),
    clientOf('http-revoked'),
    clientOf('http-operator'),
    clientOf('http-admin'),
  ];
  try {
    const grants = new PostgresGrantAdministration(db.owner);
    await grants.writeGrant({ subject: 'http-operator', projectId: 'bench', permission: 'run.stop' }, 'bench');
    await grants.writeGrant({ subject: 'http-admin', projectId: '@cluster', permission: 'worker.manage' }, 'bench');
    const {
      body: { sessionId },
    } = await active.send<{ sessionId: string }>('POST', '/v1/sessions', {});
    await operator.send('POST', '/v1/jobs', { runId: 'admission-http', projectId: 'bench', argv: ['true'] });
    const pulled = await active.send<{ assignment: { runId: string; attemptId: string; fence: number } }>(
      'POST',
      '/v1/assignments/pull',
      { sessionId },
    );
    const { runId, attemptId, fence } = pulled.body.assignment;
    const revokedSession = (await revoked.send<{ sessionId: string }>('POST', '/v1/sessions', {})).body.sessionId;
    await admin.send('POST', '/v1/workers/http-revoked/revoke');
    return [
      {
        name: 'GET /health (no hold read: the floor)',
        samples: await timedRequests(active, '/health', undefined, 'GET', 200),
      },
      {
        name: "revoked worker's tick, refused 403",
        samples: await timedRequests(
          revoked,
          '/v1/lease-control',
          { sessionId: revokedSession, runId, attemptId, fence },
          'POST',
          403,
        ),
      },
      {
        name: "active worker's renewal tick, 200",
        samples: await timedRequests(active, '/v1/lease-control', { sessionId, runId, attemptId, fence }, 'POST', 200),
      },
    ];
  } finally {
    for (const client of [active, revoked, operator, admin]) client.close();
    await plane.close();
    certs.remove();
  }
}

async function main(): Promise<void> {
  await withBenchDatabase(async (db) => {
    await new PostgresGrantAdministration(db.owner).writeGrant(
      { subject: 'bench-admin', projectId: '@cluster', permission: 'worker.manage' },
      'bench',
    );
    const header = machineHeader([
      `wire: mean of ${COST_RUNS} calls per kind after one warm-up, one pool connection, counted from the wire (ReadyForQuery, CommandComplete; writes = INSERT/UPDATE/DELETE tags)`,
      `HTTPS: ${RUNS} sequential requests per kind after 20 warm-up, one keep-alive connection per client, TLS 1.3 with client certificates, one control plane`,
    ]);
    const costs = await wireCosts(db.runtimeUrl);
    const latencies = await httpLatencies(db);
    process.stdout.write(`## Worker admission\n\n${header}\n\n`);
    const renewal = costs[0]?.wire.roundTrips ?? Number.NaN;
    process.stdout.write(
      '| database cost, from the wire | round trips | statements | + BEGIN/COMMIT/SET | writes | round trips vs renewal |\n| --- | ---: | ---: | ---: | ---: | ---: |\n',
    );
    for (const { name, wire, writes } of costs) {
      process.stdout.write(
        `| ${name} | ${wire.roundTrips.toFixed(1)} | ${wire.statements.toFixed(1)} | ${wire.transactionControl.toFixed(1)} | ${writes.toFixed(1)} | ${(wire.roundTrips / renewal).toFixed(2)}x |\n`,
      );
    }
    const tick = latencies[2]?.samples ?? [];
    process.stdout.write(
      '\n| request over HTTPS | requests | median ms | p99 ms | median vs renewal tick |\n| --- | ---: | ---: | ---: | ---: |\n',
    );
    for (const { name, samples } of latencies) {
      process.stdout.write(
        `| ${name} | ${samples.length} | ${quantile(samples, 0.5).toFixed(2)} | ${quantile(samples, 0.99).toFixed(2)} | ${(quantile(samples, 0.5) / quantile(tick, 0.5)).toFixed(2)}x |\n`,
      );
    }
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
