// Cluster stop latency and cost (issue 16, docs/decisions/0101, 0103). Not a test.
// 1. Time from `cancel` at the control plane (HTTPS, mutual TLS) to the job's exit on the worker,
//    median and p99, against the local path (durable cancel intent in SQLite, the local lifecycle
//    stops the job) in the same run.
// 2. Database cost of one lease-control tick: renewal vs stop (claim + settle) vs replay, in
//    statements and round trips, counted on the pg client.
// Run: npm run build && node dist/test/helpers/with-postgres.js node dist/bench/cluster-stop.js
//      (PIDFENCE_BENCH_RUNS, default 300)
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client, Pool } from 'pg';

import { ControlPlaneClient, startControlPlane, startWorker, CancellationDispatchControl, ClusterLeaseStore, DispatchAvailability } from '../lib/cluster/index';
import { createExecution } from '../lib/execution/index';
import { PostgresDispatchRepository, PostgresExecutionStore, PostgresGrantAdministration, PostgresRunStore } from '../lib/store/postgres/index';
import { openSqliteStore } from '../lib/store/sqlite/index';
import { makeCertificates } from '../test/helpers/certificates';
import { withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { quantile } from './lib/stats';

const RUNS = Number(process.env.PIDFENCE_BENCH_RUNS ?? 300);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function job(marker: string): string[] {
  // The trap is set before `.up` appears, so a stop after `.up` always leaves the exit marker.
  return ['sh', '-c', `trap 'echo x > ${marker}; exit 143' TERM; echo up > ${marker}.up; while :; do sleep 0.05; done`];
}

async function until(probe: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(1);
  }
}

function line(name: string, samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `| ${name} | ${samples.length} | ${quantile(sorted, 0.5).toFixed(1)} | ${quantile(sorted, 0.99).toFixed(1)} |`;
}

async function clusterLatencies(db: { runtimeUrl: string; owner: Pool }, scratch: string): Promise<number[]> {
  const certs = makeCertificates();
  const plane = await startControlPlane({ databaseUrl: db.runtimeUrl, tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert } });
  const workerPem = certs.client('bench-worker');
  const worker = await startWorker({ controlPlaneUrls: [plane.url], tls: { cert: workerPem.cert, key: workerPem.key, ca: certs.ca.cert }, journalFile: path.join(scratch, 'worker.db'), tickMs: 50, capacity: 1, ...(process.env.PIDFENCE_BENCH_DEBUG === undefined ? {} : { observe: (event) => process.stderr.write(`${JSON.stringify(event)}\n`) }) });
  await new PostgresGrantAdministration(db.owner).writeGrant({ subject: 'bench-operator', projectId: 'bench', permission: 'run.stop' }, 'bench');
  const operatorPem = certs.client('bench-operator');
  const operator = new ControlPlaneClient(plane.url, { cert: operatorPem.cert, key: operatorPem.key, ca: certs.ca.cert });
  const runStore = new PostgresRunStore(db.owner);
  const samples: number[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      const runId = `bench-${i}`;
      const marker = path.join(scratch, `${runId}.cluster`);
      await operator.send('POST', '/v1/jobs', { runId, projectId: 'bench', argv: job(marker) });
      await until(async () => (await runStore.getRun(runId))?.status === 'running' && worker.held() === 1);
      await until(() => existsSync(`${marker}.up`));
      const started = performance.now();
      await operator.send('POST', `/v1/runs/${runId}/cancel`);
      await until(() => existsSync(marker));
      samples.push(performance.now() - started);
      await until(() => worker.held() === 0);
    }
  } finally {
    operator.close();
    await worker.close();
    await plane.close();
    certs.remove();
  }
  return samples;
}

async function localLatencies(scratch: string): Promise<number[]> {
  const file = path.join(scratch, 'local.db');
  const store = openSqliteStore(file);
  const app = createExecution({
    stores: { runStore: store.runStore, repository: store.dispatchRepository, executionStore: store.executionStore, runnerStore: store.runnerStore, close: () => store.close() },
    receiptDirectory: `${file}.receipts`,
  });
  await app.recover();
  app.start();
  const samples: number[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      const marker = path.join(scratch, `local-${i}.local`);
      const [command, ...args] = job(marker);
      const admitted = await app.admit({ projectId: 'bench', command: command as string, args, stdio: 'ignore' });
      if (admitted.kind !== 'admitted') throw new Error('not admitted');
      await until(() => existsSync(`${marker}.up`));
      const started = performance.now();
      // What `pidfence cancel` writes; the runner's lifecycle stops the job.
      await store.runStore.requestCancellation({ runId: admitted.runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      await until(() => existsSync(marker));
      samples.push(performance.now() - started);
    }
  } finally {
    await app.drain();
  }
  return samples;
}

/** Counts every query the pg clients of this process send, BEGIN/COMMIT included (one round trip each). */
function countQueries(): { reset(): void; read(): { statements: number; roundTrips: number } } {
  let roundTrips = 0;
  let statements = 0;
  const original = Client.prototype.query;
  Client.prototype.query = function patched(this: Client, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text ?? '';
    roundTrips += 1;
    if (!/^\s*(BEGIN|COMMIT|ROLLBACK)/i.test(text)) statements += 1;
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof Client.prototype.query;
  return { reset: () => { roundTrips = 0; statements = 0; }, read: () => ({ statements, roundTrips }) };
}

async function tickCosts(db: { runtimeUrl: string }): Promise<string[]> {
  const pool = new Pool({ connectionString: db.runtimeUrl, max: 2 });
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: 30_000 });
  const control = new CancellationDispatchControl(leases, new PostgresDispatchRepository(pool), { replicaOwnerId: 'cp-bench', leaseDurationMs: 10_000, availability: new DispatchAvailability(10_000) });
  const runStore = new PostgresRunStore(pool);
  const sessionId = await leases.registerSession('bench-cost');
  const caller = { principal: 'bench-cost', sessionId };
  await leases.enqueueJob({ runId: 'cost-1', projectId: 'bench', argv: ['true'] });
  let pulled = await leases.pull(caller);
  while (pulled.kind === 'assigned' && pulled.assignment.runId !== 'cost-1') pulled = await leases.pull(caller);
  if (pulled.kind !== 'assigned') throw new Error('no assignment');
  const ref = pulled.assignment;
  await pool.query('SELECT 1');
  const counter = countQueries();
  const measure = async (name: string, tick: () => Promise<unknown>): Promise<string> => {
    counter.reset();
    await tick();
    const { statements, roundTrips } = counter.read();
    return `| ${name} | ${statements} | ${roundTrips} |`;
  };
  const rows = [await measure('renewal tick', () => control.tick(caller, ref))];
  await runStore.requestCancellation({ runId: 'cost-1', reason: 'user', eventId: `evt-${randomUUID()}` });
  rows.push(await measure('stop tick (claim + settle)', () => control.tick(caller, ref)));
  rows.push(await measure('replayed stop tick', () => control.tick(caller, ref)));
  await pool.end();
  return rows;
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-cluster-'));
  try {
    await withBenchDatabase(async (db) => {
      const cluster = await clusterLatencies(db, scratch);
      const local = await localLatencies(scratch);
      const costs = await tickCosts(db);
      process.stdout.write(`${machineHeader([`runs: ${RUNS} per path; worker tick 50 ms; local lifecycle period 1 s`])}\n\n`);
      process.stdout.write('| stop path: cancel → job exit | runs | median ms | p99 ms |\n| --- | ---: | ---: | ---: |\n');
      process.stdout.write(`${line('cluster (HTTPS cancel → tick → settle → worker stop)', cluster)}\n${line('local (cancel intent → lifecycle stop)', local)}\n\n`);
      process.stdout.write('| database cost | statements | round trips |\n| --- | ---: | ---: |\n');
      process.stdout.write(`${costs.join('\n')}\n`);
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exitCode = 1;
});
