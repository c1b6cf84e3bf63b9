// docs/decisions/0045: every pool pidfence opens waits a bounded time. A silent TCP listener and a
// SIGSTOPped server (every process of a throw-away cluster) both fail typed within the bound, and an
// unanswered write does not commit when the server resumes.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';

import test from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import { createLeaseToken } from '../../lib/contract/index';
import { captureIdentity, signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { grantRuntime, migratePostgres, openPostgresStore } from '../../lib/store/postgres/index';
import { CLIENT_MARGIN_MS, STATEMENT_TIMEOUT_MS } from '../../lib/store/postgres/transaction';
import { pidfence } from '../cli/pidfence-process';
import { clusterInit, clusterRemove, clusterStart, clusterUrl, type PgCluster } from '../helpers/pg-cluster';

/** Node start-up, scheduling on a loaded machine: the slack on top of a bound (the "bound + 1 s" style). */
const SLACK_MS = 2_000;
const CONNECT_TIMEOUT_S = 2;

async function elapsedMs(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

async function silentListener(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => {
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

test('a PostgreSQL that accepts TCP and never answers: every command exits 3 with one sentence within connect_timeout, and PGCONNECT_TIMEOUT is honoured too', async (t) => {
  const listener = await silentListener();
  t.teardown(() => listener.close());
  const base = `postgres://pidfence@127.0.0.1:${listener.port}/pidfence`;
  for (const [url, env] of [
    [`${base}?connect_timeout=${CONNECT_TIMEOUT_S}`, {}],
    [base, { PGCONNECT_TIMEOUT: String(CONNECT_TIMEOUT_S) }],
  ] as const) {
    // The same CLI's start-up, measured beside it: under load 24 Node's start alone took about 3 s.
    const startUpMs = await elapsedMs(() => pidfence(['--version'], env));
    let status: Awaited<ReturnType<typeof pidfence>> | undefined;
    const elapsed = await elapsedMs(async () => {
      status = await pidfence(['status', '--project', 'proj', '--db', url], env);
    });
    t.is(status?.code, 3, status?.stderr);
    t.regex(
      status?.stderr ?? '',
      /^pidfence: the postgres store lost or could not get its database connection[^\n]*\(ERR_PIDFENCE_STORE_UNAVAILABLE\)\n$/,
    );
    t.true(
      elapsed < startUpMs + CONNECT_TIMEOUT_S * 1_000 + SLACK_MS,
      `took ${elapsed} ms (start-up alone ${startUpMs} ms)`,
    );
  }
});

/** The postmaster and its children, by their captured identities (never a bare PID signal). */
function serverProcesses(cluster: PgCluster): ProcessIdentity[] {
  const postmaster = Number(readFileSync(path.join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children]
    .map((pid) => captureIdentity(pid))
    .filter((identity): identity is ProcessIdentity => identity !== null);
}

function signalAll(identities: readonly ProcessIdentity[], signal: 'SIGSTOP' | 'SIGCONT'): void {
  for (const identity of identities) signalVerified(identity, signal);
}

async function failsWithin(
  t: import('ava').ExecutionContext,
  work: Promise<unknown>,
  boundMs: number,
  codes: readonly string[],
): Promise<string> {
  const started = Date.now();
  const error = await t.throwsAsync(work);
  const elapsed = Date.now() - started;
  t.true(error instanceof PidfenceError, String(error));
  t.true(codes.includes((error as PidfenceError).code), (error as PidfenceError).code);
  t.true(elapsed < boundMs + SLACK_MS, `took ${elapsed} ms, bound ${boundMs} ms`);
  return (error as PidfenceError).code;
}

test('a SIGSTOPped server: openPostgresStore, a claim, a due page claim and a due read on a warm pool fail typed within the bound; an unanswered claim is committed only when it said COMMIT_UNKNOWN, and then only as a lease that expires', async (t) => {
  const cluster = await clusterInit({ label: 'stopped' });
  t.teardown(() => clusterRemove(cluster));
  await clusterStart(cluster);
  const admin = clusterUrl(cluster);
  await migratePostgres(admin);
  const runtimeRole = 'pidfence_runtime';
  const { Client } = await import('pg');
  const client = new Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE ROLE ${runtimeRole} LOGIN`);
  await client.end();
  await grantRuntime(admin, runtimeRole);
  const runtimeUrl = `postgres://${runtimeRole}@127.0.0.1:${cluster.port ?? 0}/postgres?connect_timeout=${CONNECT_TIMEOUT_S}`;

  const store = await openPostgresStore(runtimeUrl);
  t.teardown(() => store.close());
  const runId = 'run-stopped';
  const attemptId = 'run-stopped-a1';
  await store.runStore.createRun({ runId, projectId: 'proj' });
  await store.runStore.createAttempt({ runId, attemptId });
  const cancelled = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: 'evt-stopped-1' });
  const cancelRequestedAtMs = cancelled.kind === 'requested' ? (cancelled.run.cancelRequestedAtMs ?? -1) : -1;

  const processes = serverProcesses(cluster);
  t.true(processes.length >= 3, 'the postmaster and its background processes');
  signalAll(processes, 'SIGSTOP');
  const claimCodes: string[] = [];
  try {
    await failsWithin(t, openPostgresStore(runtimeUrl), CONNECT_TIMEOUT_S * 1_000, ['ERR_PIDFENCE_STORE_UNAVAILABLE']);
    const claim = store.dispatchRepository.claim({
      runId,
      attemptId,
      cancelRequestedAtMs,
      owner: 'stopped-test',
      token: createLeaseToken(),
      leaseDurationMs: 60_000,
    });
    claimCodes.push(
      await failsWithin(t, claim, STATEMENT_TIMEOUT_MS + CLIENT_MARGIN_MS, [
        'ERR_PIDFENCE_STORE_UNAVAILABLE',
        'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN',
      ]),
    );
    // The due page claimed as it is read (docs/decisions/0025) is one statement that commits too.
    const duePageClaim = store.dispatchRepository.claimDuePage({
      owner: 'stopped-test',
      leaseDurationMs: 60_000,
      tokens: [createLeaseToken()],
    });
    claimCodes.push(
      await failsWithin(t, duePageClaim, STATEMENT_TIMEOUT_MS + CLIENT_MARGIN_MS, [
        'ERR_PIDFENCE_STORE_UNAVAILABLE',
        'ERR_PIDFENCE_STORE_COMMIT_UNKNOWN',
      ]),
    );
    // A read is one statement too (docs/decisions/0024), with nothing to commit: never COMMIT_UNKNOWN.
    await failsWithin(t, store.dispatchRepository.duePage({ limit: 4 }), STATEMENT_TIMEOUT_MS + CLIENT_MARGIN_MS, [
      'ERR_PIDFENCE_STORE_UNAVAILABLE',
    ]);
  } finally {
    signalAll(processes, 'SIGCONT');
  }
  // The claim is one statement that commits by itself (docs/decisions/0021): a server that resumes
  // may still run what it had received. UNAVAILABLE promises nothing was committed; COMMIT_UNKNOWN
  // says it may have been, and then it is a lease of an owner that never learned its fence: it
  // expires and the next claim takes over, so no stop can ever be released from it.
  const after = await openPostgresStore(runtimeUrl);
  t.teardown(() => after.close());
  const record = await after.dispatchRepository.getRecord(runId);
  // The cancel wrote the pending record (docs/decisions/0022); an uncommitted claim leaves it as it was.
  const untouched = record?.status === 'pending' && record.dispatchCount === 0;
  if (claimCodes.every((code) => code === 'ERR_PIDFENCE_STORE_UNAVAILABLE')) t.true(untouched, 'nothing was committed');
  else
    t.true(
      untouched || (record?.status === 'leased' && record.leaseOwner === 'stopped-test'),
      JSON.stringify(record?.status),
    );
});
