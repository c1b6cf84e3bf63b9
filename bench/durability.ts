// What "acknowledged means durable" costs on SQLite (docs/decisions/0010), side by side in one run:
// the claim + settle cycle before and after (both NORMAL: dispatch traffic is not acknowledged), with
// every commit FULL as the reference; and the acknowledged cancel intent before (a NORMAL commit, as
// every commit was until issue 28) and after (synced: one WAL fsync before "cancel requested").
// Both cancel rows run the same statements through the store's one write boundary; only the sync
// differs. Rounds alternate the contenders so a busy moment of the machine hits both.
// Run: npm run bench:durability
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { createLeaseToken } from '../lib/contract/index';
import { openSqliteStore, type SqliteStore, type SqliteSynchronous } from '../lib/store/sqlite/index';
import { driverOf } from '../lib/store/sqlite/driver';
import { appendRunEvent } from '../lib/store/sqlite/run-events';
import { SqliteBoundary } from '../lib/store/sqlite/transaction';
import { machineHeader } from './lib/machine';
import { summarize } from './lib/stats';
import { renderTable, renderTargets, type Row } from './lib/table';

const OPS = Number(process.env.PIDFENCE_BENCH_OPS ?? 300);
const ROUNDS = Number(process.env.PIDFENCE_BENCH_ROUNDS ?? 3);

interface Bench {
  readonly store: SqliteStore;
  cleanup(): void;
}

function openBench(synchronous: SqliteSynchronous): Bench {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pidfence-durability-'));
  const store = openSqliteStore(path.join(dir, 'bench.db'), { synchronous, diskReserve: false });
  return {
    store,
    cleanup: () => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `count` runs with an attempt; with cancel intent when `cancelled` (the cycle needs a due dispatch). */
async function seed(
  store: SqliteStore,
  count: number,
  cancelled: boolean,
): Promise<Array<{ runId: string; attemptId: string; cancelRequestedAtMs: number }>> {
  const runs = [];
  for (let i = 0; i < count; i += 1) {
    const runId = `run-${randomUUID()}`;
    await store.runStore.createRun({ runId, projectId: 'bench' });
    await store.runStore.createAttempt({ runId, attemptId: `${runId}-a1` });
    const intent = cancelled
      ? await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` })
      : null;
    runs.push({
      runId,
      attemptId: `${runId}-a1`,
      cancelRequestedAtMs: intent?.kind === 'requested' ? (intent.run.cancelRequestedAtMs ?? 0) : 0,
    });
  }
  driverOf(store.database).pragma('wal_checkpoint(TRUNCATE)');
  return runs;
}

/** ns per claim + settle cycle, one sample per cycle. */
async function cycleSamples(synchronous: SqliteSynchronous): Promise<number[]> {
  const bench = openBench(synchronous);
  try {
    const runs = await seed(bench.store, OPS, true);
    const samples: number[] = [];
    for (const run of runs) {
      const started = process.hrtime.bigint();
      const token = createLeaseToken();
      const claim = await bench.store.dispatchRepository.claim({
        ...run,
        owner: 'bench',
        token,
        leaseDurationMs: 60_000,
      });
      if (claim.kind !== 'claimed') throw new Error(`bench: claim was ${claim.kind}`);
      const settled = await bench.store.dispatchRepository.recordResult({
        runId: run.runId,
        attemptId: run.attemptId,
        owner: 'bench',
        token,
        expectedVersion: claim.record.version,
        result: 'termination_requested',
        eventId: `evt-${randomUUID()}`,
      });
      if (settled.kind !== 'recorded') throw new Error('bench: settle failed');
      samples.push(Number(process.hrtime.bigint() - started));
    }
    return samples;
  } finally {
    bench.cleanup();
  }
}

/**
 * The cancel intent's transaction as SqliteRunStore.requestCancellation writes it (intent, event,
 * pending dispatch), through the same boundary, committed NORMAL: the commit before issue 28.
 */
function cancelUnsynced(boundary: SqliteBoundary, runId: string): void {
  boundary.write(
    'benchCancelIntent',
    (nowMs) => {
      const run = boundary.statements.selectRun.get(runId) as { version: number } | undefined;
      if (run === undefined) throw new Error('bench: no run');
      boundary.statements.writeCancelIntent.run({ runId, version: run.version, reason: 'user', nowMs });
      appendRunEvent(boundary.statements, {
        runId,
        version: run.version,
        type: 'run.cancel_requested',
        eventId: `evt-${randomUUID()}`,
        payload: { reason: 'user' },
        nowMs,
      });
      boundary.statements.insertPendingDispatch.run({ runId, nowMs });
    },
    { synced: false },
  );
}

/** ns per acknowledged cancel intent: `synced` through the store's own requestCancellation, else NORMAL. */
async function cancelSamples(synced: boolean): Promise<number[]> {
  const bench = openBench('NORMAL');
  try {
    const runs = await seed(bench.store, OPS, false);
    const boundary = new SqliteBoundary(bench.store.database);
    const samples: number[] = [];
    for (const run of runs) {
      const started = process.hrtime.bigint();
      if (synced) {
        const intent = await bench.store.runStore.requestCancellation({
          runId: run.runId,
          reason: 'user',
          eventId: `evt-${randomUUID()}`,
        });
        if (intent.kind !== 'requested') throw new Error(`bench: intent was ${intent.kind}`);
      } else {
        cancelUnsynced(boundary, run.runId);
      }
      samples.push(Number(process.hrtime.bigint() - started));
    }
    return samples;
  } finally {
    bench.cleanup();
  }
}

function row(name: string, samples: readonly number[], baseline?: string): Row {
  const summary = summarize(samples);
  return {
    name,
    median: summary.median,
    p99: summary.p99,
    samples: summary.count,
    ...(baseline === undefined ? {} : { baseline }),
  };
}

async function main(): Promise<void> {
  console.log('# Acknowledged means durable: what the synced commits cost (SQLite, WAL)\n');
  console.log(
    machineHeader([
      `ops=${OPS} per contender per round, rounds=${ROUNDS} (alternating), file system of ${os.tmpdir()}`,
    ]),
  );
  const samples: Record<string, number[]> = {
    cycleBefore: [],
    cycleAfter: [],
    cycleFull: [],
    cancelBefore: [],
    cancelAfter: [],
  };
  for (let round = 0; round < ROUNDS; round += 1) {
    samples.cycleBefore?.push(...(await cycleSamples('NORMAL')));
    samples.cancelBefore?.push(...(await cancelSamples(false)));
    samples.cycleFull?.push(...(await cycleSamples('FULL')));
    // After: the same NORMAL connection, whose acknowledged commits are synced one by one.
    samples.cycleAfter?.push(...(await cycleSamples('NORMAL')));
    samples.cancelAfter?.push(...(await cancelSamples(true)));
  }
  const cycle = [
    row('claim + settle, before (all NORMAL)', samples.cycleBefore ?? []),
    row(
      'claim + settle, after (dispatch traffic stays NORMAL)',
      samples.cycleAfter ?? [],
      'claim + settle, before (all NORMAL)',
    ),
    row(
      'claim + settle, every commit FULL (reference)',
      samples.cycleFull ?? [],
      'claim + settle, before (all NORMAL)',
    ),
  ];
  const cancel = [
    row('cancel intent, before (NORMAL commit)', samples.cancelBefore ?? []),
    row('cancel intent, after (synced commit)', samples.cancelAfter ?? [], 'cancel intent, before (NORMAL commit)'),
  ];
  console.log('\n## The dispatch cycle (claim + settle of termination_requested)\n');
  console.log(renderTable(cycle));
  console.log('\n## An acknowledged cancel (the commit before "cancel requested")\n');
  console.log(renderTable(cancel));
  const ratio = (rows: readonly Row[], i: number): number =>
    (rows[i]?.median ?? Number.NaN) / (rows[0]?.median ?? Number.NaN);
  console.log(
    `\n${renderTargets([
      {
        name: 'the cycle is unchanged by the synced acknowledgements',
        ratio: ratio(cycle, 1),
        op: '<=',
        limit: 1.25,
        detail: 'after / before, medians',
      },
    ])}`,
  );
  const addedNs = (cancel[1]?.median ?? Number.NaN) - (cancel[0]?.median ?? Number.NaN);
  console.log(
    `\nA synced cancel intent adds ${formatMs(addedNs)} (median ${formatMs(cancel[0]?.median)} → ${formatMs(cancel[1]?.median)}): one WAL fsync on this disk. \`pidfence cancel\` as a command costs a Node start (~100-300 ms here) on top of either.`,
  );
}

function formatMs(ns: number | undefined): string {
  return ns === undefined ? 'n/a' : `${(ns / 1e6).toFixed(2)} ms`;
}

void main();
