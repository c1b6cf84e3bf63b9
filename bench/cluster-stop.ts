// Cluster stop latency and cost (issue 17 §6; docs/decisions/0101, 0103). Not a test.
// 1. Time from a cancel to the job's exit: at the control plane (HTTPS, mutual TLS; the worker's tick
//    settles the dispatch and the worker stops the job), against two local paths in the same run:
//    durable cancel intent written in this process (the local lifecycle stops the job), and the
//    `pidfence cancel` command against a `pidfence run` (both real processes). Median and p99.
// 2. Database cost of one lease-control tick from the wire: renewal vs stop (claim + settle) vs a
//    replayed stop, in round trips and statements (ReadyForQuery and CommandComplete messages).
// Run: npm run bench:cluster (PIDFENCE_BENCH_RUNS, default 300; PIDFENCE_BENCH_CLI_RUNS, default 100)
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Pool } from 'pg';

import {
  ControlPlaneClient,
  startControlPlane,
  startWorker,
  CancellationDispatchControl,
  ClusterLeaseStore,
  DispatchAvailability,
} from '../lib/cluster/index';
import { createExecution } from '../lib/execution/index';
import {
  PostgresDispatchRepository,
  PostgresExecutionStore,
  PostgresGrantAdministration,
  PostgresRunStore,
} from '../lib/store/postgres/index';
import { osPrincipal } from '../lib/cli/os-user';
import { openSqliteStore } from '../lib/store/sqlite/index';
import { makeCertificates } from '../test/helpers/certificates';
import { withBenchDatabase } from './lib/dispatch-postgres';
import { machineHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { tallyWire, wireSince, type WireTally } from '../test/helpers/wire-tally';

const RUNS = Number(process.env.PIDFENCE_BENCH_RUNS ?? 300);
const CLI_RUNS = Number(process.env.PIDFENCE_BENCH_CLI_RUNS ?? 100);
/** Lease-control ticks of each kind whose wire cost is averaged (after one warm-up run). */
const COST_RUNS = 20;
const CLI = path.resolve(__dirname, '..', 'lib', 'cli', 'main.js');
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

function median(samples: readonly number[]): number {
  return quantile(samples, 0.5);
}

function line(name: string, samples: number[], baseline: number[]): string {
  return `| ${name} | ${samples.length} | ${median(samples).toFixed(1)} | ${quantile(samples, 0.99).toFixed(1)} | ${(median(samples) / median(baseline)).toFixed(2)}x |`;
}

async function clusterLatencies(db: { runtimeUrl: string; owner: Pool }, scratch: string): Promise<number[]> {
  const certs = makeCertificates();
  const plane = await startControlPlane({
    databaseUrl: db.runtimeUrl,
    tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert },
  });
  const workerPem = certs.client('bench-worker');
  const worker = await startWorker({
    controlPlaneUrls: [plane.url],
    tls: { cert: workerPem.cert, key: workerPem.key, ca: certs.ca.cert },
    journalFile: path.join(scratch, 'worker.db'),
    tickMs: 50,
    capacity: 1,
    ...(process.env.PIDFENCE_BENCH_DEBUG === undefined
      ? {}
      : { observe: (event) => process.stderr.write(`${JSON.stringify(event)}\n`) }),
  });
  // A cancel needs run.read (seeing the run) and run.stop, over HTTP as from the CLI (docs/decisions/0043, 0224).
  for (const permission of ['run.read', 'run.stop'] as const)
    await new PostgresGrantAdministration(db.owner).writeGrant(
      { subject: 'bench-operator', projectId: 'bench', permission },
      'bench',
    );
  const operatorPem = certs.client('bench-operator');
  const operator = new ControlPlaneClient(plane.url, {
    cert: operatorPem.cert,
    key: operatorPem.key,
    ca: certs.ca.cert,
  });
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
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
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
      await store.runStore.requestCancellation({
        runId: admitted.runId,
        reason: 'user',
        eventId: `evt-${randomUUID()}`,
      });
      await until(() => existsSync(marker));
      samples.push(performance.now() - started);
    }
  } finally {
    await app.drain();
  }
  return samples;
}

/** `pidfence cancel RUN` (a new process) against the `pidfence run` that owns the job; the time includes both commands' start. */
async function cliLatencies(scratch: string): Promise<{ stop: number[]; command: number[] }> {
  const file = path.join(scratch, 'cli.db');
  const store = openSqliteStore(file);
  for (const permission of ['run.read', 'run.stop'] as const)
    await store.managementStore.writeGrant({ subject: osPrincipal(), projectId: 'bench', permission }, 'bench');
  store.close();
  const stop: number[] = [];
  const command: number[] = [];
  for (let i = 0; i < CLI_RUNS; i++) {
    const marker = path.join(scratch, `cli-${i}.local`);
    const runner = spawn(process.execPath, [CLI, 'run', '--db', file, '--project', 'bench', '--', ...job(marker)], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let said = '';
    runner.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      said += chunk;
    });
    const runnerExit = once(runner, 'exit');
    await until(() => /run (\S+) started/.test(said) && existsSync(`${marker}.up`));
    const runId = /run (\S+) started/.exec(said)?.[1] as string;
    const started = performance.now();
    const cancel = spawn(process.execPath, [CLI, 'cancel', runId, '--db', file], { stdio: 'ignore' });
    const cancelReturned = once(cancel, 'exit').then(() => performance.now() - started);
    await until(() => existsSync(marker));
    stop.push(performance.now() - started);
    command.push(await cancelReturned);
    await runnerExit;
  }
  return { stop, command };
}

interface TickCost {
  readonly name: string;
  readonly wire: WireTally;
}

/** The wire cost of each kind of tick, averaged over COST_RUNS runs, on one replica's wrapper as the runtime role. */
async function tickCosts(db: { runtimeUrl: string }): Promise<TickCost[]> {
  const pool = new Pool({ connectionString: db.runtimeUrl, max: 1 });
  const wire = tallyWire(pool);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: 30_000 });
  const control = new CancellationDispatchControl(leases, new PostgresDispatchRepository(pool), {
    replicaOwnerId: 'cp-bench',
    leaseDurationMs: 10_000,
    availability: new DispatchAvailability(10_000),
  });
  const runStore = new PostgresRunStore(pool);
  const caller = { principal: 'bench-cost', sessionId: await leases.registerSession('bench-cost') };
  const totals = new Map<string, WireTally>();
  const measure = async (name: string, counted: boolean, tick: () => Promise<unknown>): Promise<void> => {
    const before = { ...wire };
    await tick();
    if (!counted) return;
    const spent = wireSince(before, wire);
    const sum = totals.get(name) ?? { roundTrips: 0, statements: 0, transactionControl: 0 };
    totals.set(name, {
      roundTrips: sum.roundTrips + spent.roundTrips,
      statements: sum.statements + spent.statements,
      transactionControl: sum.transactionControl + spent.transactionControl,
    });
  };
  try {
    for (let i = 0; i <= COST_RUNS; i++) {
      const runId = `cost-${i}`;
      await leases.enqueueJob({ runId, projectId: 'bench', argv: ['true'] });
      let pulled = await leases.pull(caller);
      while (pulled.kind === 'assigned' && pulled.assignment.runId !== runId) pulled = await leases.pull(caller);
      if (pulled.kind !== 'assigned') throw new Error('no assignment');
      const ref = pulled.assignment;
      await measure('renewal tick', i > 0, () => control.tick(caller, ref));
      await runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      await measure('stop tick (tick + claim + settle)', i > 0, () => control.tick(caller, ref));
      await measure('replayed stop tick (tick + claim finds it dispatched)', i > 0, () => control.tick(caller, ref));
    }
  } finally {
    await pool.end();
  }
  return [...totals].map(([name, sum]) => ({
    name,
    wire: {
      roundTrips: sum.roundTrips / COST_RUNS,
      statements: sum.statements / COST_RUNS,
      transactionControl: sum.transactionControl / COST_RUNS,
    },
  }));
}

function costTable(costs: readonly TickCost[]): string {
  const renewal = costs[0]?.wire.roundTrips ?? Number.NaN;
  const rows = costs.map(
    ({ name, wire }) =>
      `| ${name} | ${wire.roundTrips.toFixed(1)} | ${wire.statements.toFixed(1)} | ${wire.transactionControl.toFixed(1)} | ${(wire.roundTrips / renewal).toFixed(2)}x |`,
  );
  return [
    '| database cost of one tick, from the wire | round trips | statements | + BEGIN/COMMIT/SET | round trips vs renewal |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-cluster-'));
  try {
    await withBenchDatabase(async (db) => {
      const header = machineHeader([
        `runs: ${RUNS} on the cluster path and the in-process local path, ${CLI_RUNS} on the \`pidfence cancel\` path`,
        "worker tick 50 ms (capacity 1, one control plane); the local lifecycles (the worker's, the in-process one, `pidfence run`'s) cycle every 1 s (standalone)",
        `tick cost: mean of ${COST_RUNS} runs per kind after one warm-up, one pool connection, counted from the wire (ReadyForQuery, CommandComplete)`,
      ]);
      const cluster = await clusterLatencies(db, scratch);
      const local = await localLatencies(scratch);
      const cli = await cliLatencies(scratch);
      const costs = await tickCosts(db);
      process.stdout.write(`## Cluster stop\n\n${header}\n\n`);
      process.stdout.write(
        '| stop path: cancel → job exit | runs | median ms | p99 ms | median vs cluster |\n| --- | ---: | ---: | ---: | ---: |\n',
      );
      process.stdout.write(
        `${[
          line('cluster: HTTPS cancel → tick → claim + settle → worker stops the job', cluster, cluster),
          line('local: cancel intent written in process → lifecycle stops the job', local, cluster),
          line('local: `pidfence cancel` process → `pidfence run` stops the job', cli.stop, cluster),
          line('(the `pidfence cancel` process itself: spawn → exit)', cli.command, cluster),
        ].join('\n')}\n\n`,
      );
      process.stdout.write(`${costTable(costs)}\n`);
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
