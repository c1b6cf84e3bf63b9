// A second process on one SQLite store, run under the clock-step shim (docs/decisions/0190), for the
// lease and backoff checks of test/execution/clock-dispatch.test.ts. Prints one line per fact.
// argv: claim-loop <file> <runId> <attemptId> <cancelRequestedAtMs> <forMs>
//         claim every 50 ms for <forMs>: "claimed <ms>" at the first win, else "gave-up <last outcome>";
//         "leased <ms>" once for the first refusal, so the test sees both.
//       backoff <file> <runId> <attemptId> <cancelRequestedAtMs> <forMs>
//         claim, settle handle_missing with a 1 s retry, print "settled", wait until the test has
//         stepped this process's wall clock, print "stepped", then claim-loop from the settle.
import { randomUUID } from 'node:crypto';

import { createLeaseToken } from '../../lib/contract/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';

const LEASE_MS = 10_000;
const RETRY_DELAY_MS = 1_000;
const STEP_SEEN_MS = 3_600_000;

interface Target {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
}

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function claimOnce(store: SqliteStore, target: Target, token = createLeaseToken()) {
  return {
    token,
    outcome: await store.dispatchRepository.claim({
      ...target,
      owner: 'clock-child',
      token,
      leaseDurationMs: LEASE_MS,
    }),
  };
}

async function claimLoop(store: SqliteStore, target: Target, since: number, forMs: number): Promise<void> {
  let last = 'none';
  let refusedSeen = false;
  while (performance.now() - since < forMs) {
    const { outcome } = await claimOnce(store, target);
    if (outcome.kind === 'claimed') {
      say(`claimed ${Math.round(performance.now() - since)}`);
      return;
    }
    if (!refusedSeen) say(`${outcome.kind} ${Math.round(performance.now() - since)}`);
    refusedSeen = true;
    last = outcome.kind;
    await sleep(50);
  }
  say(`gave-up ${last}`);
}

async function backoff(store: SqliteStore, target: Target, forMs: number): Promise<void> {
  const { token, outcome } = await claimOnce(store, target);
  if (outcome.kind !== 'claimed') throw new Error(`first claim: ${outcome.kind}`);
  await store.dispatchRepository.recordResult({
    runId: target.runId,
    attemptId: target.attemptId,
    owner: 'clock-child',
    token,
    expectedVersion: outcome.record.version,
    result: 'handle_missing',
    eventId: `evt-${randomUUID()}`,
    retryDelayMs: RETRY_DELAY_MS,
  });
  const settledAt = performance.now();
  const wallAtSettle = Date.now();
  say('settled');
  while (Math.abs(Date.now() - wallAtSettle) < STEP_SEEN_MS) await sleep(10);
  say('stepped');
  await claimLoop(store, target, settledAt, forMs);
}

async function main(): Promise<void> {
  const [mode, file, runId, attemptId, atMs, forMs] = process.argv.slice(2);
  if (file === undefined || runId === undefined || attemptId === undefined || atMs === undefined || forMs === undefined)
    throw new Error('usage: clock-step-child <mode> <file> <runId> <attemptId> <cancelRequestedAtMs> <forMs>');
  const store = openSqliteStore(file);
  const target = { runId, attemptId, cancelRequestedAtMs: Number(atMs) };
  try {
    if (mode === 'claim-loop') await claimLoop(store, target, performance.now(), Number(forMs));
    else if (mode === 'backoff') await backoff(store, target, Number(forMs));
    else throw new Error(`unknown mode ${mode}`);
  } finally {
    store.close();
  }
}

void main().catch((error: unknown) => {
  say(`error ${(error as Error).message}`);
  process.exitCode = 1;
});
