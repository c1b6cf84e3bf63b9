// The PostgreSQL rows of bench/dispatch-throughput.ts (design/postgres; design/architecture §12): claim + settle cycles
// per second through PostgresDispatchRepository, a hand-written minimal pg cycle with the same fences
// and lock order, and pg-boss 10.4.2 fetch + complete, each with 1 and 4 clients on one server.
import { createHash, randomBytes } from 'node:crypto';

import PgBoss from 'pg-boss';
import { Client, Pool } from 'pg';

import { createLeaseToken } from '../../lib/contract/index';
import { PostgresDispatchRepository } from '../../lib/store/postgres/index';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/pg-store';

const DOMAIN = 'pidfence.cancellation-dispatch-lease.v1\0';
export const CANCELLED_AT_MS = 1_700_000_000_000;

export type PgSide = 'repository' | 'hand-written' | 'pg-boss';

/** Splits `cycles` over `clients` workers that each run their share back to back; cycles/s overall. */
async function timed(
  clients: number,
  cycles: number,
  cycle: (worker: number, index: number) => Promise<void>,
): Promise<number> {
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: clients }, async (_, worker) => {
      for (let i = worker; i < cycles; i += clients) await cycle(worker, i);
    }),
  );
  return cycles / (Number(process.hrtime.bigint() - started) / 1e9);
}

/** `count` running, cancelled runs with the pending dispatch the cancel writes (docs/decisions/0022). */
export async function seedRuns(db: MigratedDatabase, prefix: string, count: number, handle = 'h'): Promise<void> {
  await db.owner.query(
    `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    SELECT $1 || g, 'project-a', 'runtime', 'running', 1, $3::bigint, 'user', 2, $3::bigint, $3::bigint FROM generate_series(0, $2::int - 1) AS g`,
    [prefix, count, CANCELLED_AT_MS],
  );
  await db.owner.query(
    `INSERT INTO attempts (run_id, id, status, pid, handle, created_at_ms, updated_at_ms)
    SELECT $1 || g, $1 || g || '-a1', 'running', 4242, $4, $3::bigint, $3::bigint FROM generate_series(0, $2::int - 1) AS g`,
    [prefix, count, CANCELLED_AT_MS, handle],
  );
  await db.owner.query(
    `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms, created_at_ms, updated_at_ms)
    SELECT $1 || g, 'project-a', $1 || g || '-a1', 'pending', 0, 0, $3::bigint, $3::bigint, $3::bigint FROM generate_series(0, $2::int - 1) AS g`,
    [prefix, count, CANCELLED_AT_MS],
  );
  await db.owner.query('ANALYZE runs, attempts, cancellation_dispatches');
}

async function measureRepository(
  db: MigratedDatabase,
  clients: number,
  cycles: number,
  round: string,
): Promise<number> {
  const prefix = `repo-${round}-`;
  await seedRuns(db, prefix, cycles);
  const pool = new Pool({ connectionString: db.runtimeUrl, max: clients });
  try {
    await Promise.all(Array.from({ length: clients }, () => pool.query('SELECT 1')));
    const repository = new PostgresDispatchRepository(pool);
    return await timed(clients, cycles, async (worker, i) => {
      const runId = `${prefix}${i}`;
      const owner = `bench-worker-${worker}`;
      const token = createLeaseToken();
      const claim = await repository.claim({
        runId,
        attemptId: `${runId}-a1`,
        cancelRequestedAtMs: CANCELLED_AT_MS,
        owner,
        token,
        leaseDurationMs: 60_000,
      });
      if (claim.kind !== 'claimed') throw new Error(`bench: claim was ${claim.kind}`);
      const settled = await repository.recordResult({
        runId,
        attemptId: `${runId}-a1`,
        owner,
        token,
        expectedVersion: claim.record.version,
        result: 'termination_requested',
        eventId: `${runId}-e2`,
      });
      if (settled.kind !== 'recorded') throw new Error('bench: settle failed');
    });
  } finally {
    await pool.end();
  }
}

/** The FACTS.md baseline shape: the same fences and lock order, database time, no library, no limits. */
const MINIMAL_SCHEMA = `
CREATE TABLE IF NOT EXISTS hw_runs (id text PRIMARY KEY, owner text NOT NULL, status text NOT NULL, version bigint NOT NULL,
  cancel_requested_at_ms bigint, next_event_seq bigint NOT NULL, updated_at_ms bigint NOT NULL);
CREATE TABLE IF NOT EXISTS hw_attempts (run_id text NOT NULL REFERENCES hw_runs (id), id text NOT NULL, status text NOT NULL, PRIMARY KEY (run_id, id));
CREATE TABLE IF NOT EXISTS hw_dispatches (run_id text PRIMARY KEY, attempt_id text NOT NULL, status text NOT NULL, version bigint NOT NULL,
  dispatch_count bigint NOT NULL, lease_owner text, lease_token_digest text, lease_expires_at_ms bigint, last_result text,
  updated_at_ms bigint NOT NULL, FOREIGN KEY (run_id, attempt_id) REFERENCES hw_attempts (run_id, id));
CREATE TABLE IF NOT EXISTS hw_events (run_id text NOT NULL, seq bigint NOT NULL, id text NOT NULL, type text NOT NULL, payload json NOT NULL,
  created_at_ms bigint NOT NULL, PRIMARY KEY (run_id, seq));`;
const NOW = 'floor(extract(epoch FROM transaction_timestamp()) * 1000)::bigint';

async function measureHandWritten(
  db: MigratedDatabase,
  clients: number,
  cycles: number,
  round: string,
): Promise<number> {
  const prefix = `hw-${round}-`;
  await db.owner.query(MINIMAL_SCHEMA);
  await db.owner.query(
    `INSERT INTO hw_runs SELECT $1 || g, 'runtime', 'running', 1, $2::bigint, 2, $2::bigint FROM generate_series(0, $3::int - 1) AS g`,
    [prefix, CANCELLED_AT_MS, cycles],
  );
  await db.owner.query(
    `INSERT INTO hw_attempts SELECT $1 || g, $1 || g || '-a1', 'running' FROM generate_series(0, $2::int - 1) AS g`,
    [prefix, cycles],
  );
  await db.owner.query('ANALYZE hw_runs, hw_attempts');
  const connections = await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new Client({ connectionString: db.ownerUrl });
      await client.connect();
      return client;
    }),
  );
  const digest = (token: string) => createHash('sha256').update(DOMAIN).update(token).digest('hex');
  try {
    return await timed(clients, cycles, async (worker, i) => {
      const client = connections[worker] as Client;
      const runId = `${prefix}${i}`;
      const attemptId = `${runId}-a1`;
      const owner = `bench-worker-${worker}`;
      const token = randomBytes(32).toString('base64url');
      await client.query('BEGIN');
      await client.query(
        'SELECT owner, status, version, cancel_requested_at_ms FROM hw_runs WHERE id = $1 FOR NO KEY UPDATE',
        [runId],
      );
      await client.query('SELECT status FROM hw_attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE', [
        runId,
        attemptId,
      ]);
      await client.query(
        `INSERT INTO hw_dispatches VALUES ($1, $2, 'leased', 1, 1, $3, $4, ${NOW} + 60000, NULL, ${NOW})`,
        [runId, attemptId, owner, digest(token)],
      );
      await client.query('COMMIT');
      await client.query('BEGIN');
      const run = await client.query<{ version: string }>(
        'SELECT version FROM hw_runs WHERE id = $1 FOR NO KEY UPDATE',
        [runId],
      );
      await client.query('SELECT 1 FROM hw_attempts WHERE run_id = $1 AND id = $2 FOR NO KEY UPDATE', [
        runId,
        attemptId,
      ]);
      const settled = await client.query<{ dispatch_count: string }>(
        `UPDATE hw_dispatches SET status = 'dispatched', version = version + 1, last_result = 'termination_requested',
        lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL, updated_at_ms = ${NOW}
        WHERE run_id = $1 AND attempt_id = $2 AND lease_owner = $3 AND lease_token_digest = $4 AND version = 1 RETURNING dispatch_count`,
        [runId, attemptId, owner, digest(token)],
      );
      const reserved = await client.query<{ seq: string }>(
        `UPDATE hw_runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = ${NOW}
        WHERE id = $1 AND version = $2 RETURNING next_event_seq - 1 AS seq`,
        [runId, run.rows[0]?.version],
      );
      await client.query(`INSERT INTO hw_events VALUES ($1, $2, $3, 'run.cancel_dispatched', $4, ${NOW})`, [
        runId,
        reserved.rows[0]?.seq,
        `${runId}-e2`,
        JSON.stringify({
          attemptId,
          dispatchCount: Number(settled.rows[0]?.dispatch_count),
          result: 'termination_requested',
        }),
      ]);
      await client.query('COMMIT');
    });
  } finally {
    await Promise.all(connections.map((client) => client.end()));
  }
}

async function measurePgBoss(db: MigratedDatabase, clients: number, cycles: number, round: string): Promise<number> {
  const queue = `bench_${round.replace(/[^a-z0-9]/g, '_')}`;
  // No supervisor, scheduler or monitor: only fetch + complete are measured.
  const boss = new PgBoss({ connectionString: db.ownerUrl, max: clients, supervise: false, schedule: false });
  boss.on('error', () => undefined);
  await boss.start();
  try {
    await boss.createQueue(queue);
    for (let i = 0; i < cycles; i += 500) {
      await boss.insert(
        Array.from({ length: Math.min(500, cycles - i) }, (_, j) => ({ name: queue, data: { runId: `run-${i + j}` } })),
      );
    }
    return await timed(clients, cycles, async () => {
      const [job] = await boss.fetch(queue);
      if (job === undefined) throw new Error('bench: pg-boss queue ran dry');
      await boss.complete(queue, job.id);
    });
  } finally {
    await boss.stop({ graceful: false, wait: true, timeout: 1_000 });
  }
}

export const PG_SIDES: Readonly<
  Record<PgSide, (db: MigratedDatabase, clients: number, cycles: number, round: string) => Promise<number>>
> = {
  repository: measureRepository,
  'hand-written': measureHandWritten,
  'pg-boss': measurePgBoss,
};

export async function withBenchDatabase<T>(use: (db: MigratedDatabase) => Promise<T>): Promise<T> {
  const db = await migratedDatabase('bench');
  try {
    return await use(db);
  } finally {
    await db.dispose();
  }
}

export async function serverVersion(db: MigratedDatabase): Promise<string> {
  const { rows } = await db.admin.query<{ version: string; fsync: string; sync: string }>(
    "SELECT current_setting('server_version') AS version, current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync",
  );
  return `PostgreSQL ${rows[0]?.version} (fsync=${rows[0]?.fsync}, synchronous_commit=${rows[0]?.sync})`;
}
