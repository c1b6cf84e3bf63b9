// design/dispatch §6 gate 11 and design/postgres §Verification on a real PostgreSQL server: racing connections get exactly
// one claim winner per round, the raw token reaches neither pg_dump nor the WAL, the runtime role
// cannot delete, truncate or change the schema, and a lock wait ends after the lock timeout, typed.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

import test from 'ava';
import { Pool } from 'pg';

import { PidfenceError } from '../../lib/base/errors';
import { createLeaseToken, type ClaimCommand } from '../../lib/contract/index';
import { CLOCK_SQL } from '../../lib/store/postgres/clock-statements';
import { DISPATCH_SQL } from '../../lib/store/postgres/dispatch-statements';
import { PostgresDispatchRepository, PostgresRunStore } from '../../lib/store/postgres/index';
import { RUN_SQL } from '../../lib/store/postgres/run-statements';
import { ensureServerBinaries } from '../helpers/pg-cluster';
import { pgDump } from '../helpers/pg-schema';
import { adminUrlFor, migratedDatabaseForFile, type MigratedDatabase } from '../helpers/pg-store';
import { seedCancelledRuns } from '../helpers/cancelled-runs';

/** Any fixed past instant: the seeded runs were "cancelled" then. */
const CANCELLED_AT_MS = 1_700_000_000_000;
const WAL_FLUSH_WAIT_MS = 10_000;
/** xlp_info flag and the MAXALIGNed sizes of XLogPageHeaderData / XLogLongPageHeaderData (PostgreSQL 15, x86-64 and arm64). */
const XLP_LONG_HEADER = 0x0002;
const SHORT_PAGE_HEADER = 24;
const LONG_PAGE_HEADER = 40;

const ready = migratedDatabaseForFile(test, 'gate11');

function runtimePool(db: MigratedDatabase, max = 1): Pool {
  const pool = new Pool({ connectionString: db.runtimeUrl, max });
  pool.on('error', () => undefined);
  return pool;
}

/** `count` cancelled runs with a running attempt, written by the owner in two statements. */
function claimOf(runId: string, owner: string): ClaimCommand {
  return {
    runId,
    attemptId: `${runId}-a1`,
    cancelRequestedAtMs: CANCELLED_AT_MS,
    owner,
    token: createLeaseToken(),
    leaseDurationMs: 60_000,
  };
}

async function race(t: import('ava').ExecutionContext, connections: number, rounds: number): Promise<void> {
  const db = await ready;
  const prefix = `race${connections}`;
  const runIds = await seedCancelledRuns(db.owner, prefix, rounds, CANCELLED_AT_MS);
  const pools = Array.from({ length: connections }, () => runtimePool(db));
  t.teardown(() => Promise.all(pools.map((pool) => pool.end())));
  const repositories = pools.map((pool) => new PostgresDispatchRepository(pool));
  // Open every connection before the first round, so each round races claims, not connects.
  await Promise.all(pools.map((pool) => pool.query('SELECT 1')));
  const startedAt = Date.now();
  const wins = new Map<string, number>();
  let badRounds = 0;
  for (const runId of runIds) {
    const outcomes = await Promise.all(
      repositories.map((repository, i) => repository.claim(claimOf(runId, `owner-${i}`))),
    );
    const winners = outcomes.flatMap((outcome, i) => (outcome.kind === 'claimed' ? [`owner-${i}`] : []));
    const losers = outcomes.filter((outcome) => outcome.kind === 'leased').length;
    if (winners.length !== 1 || losers !== connections - 1) badRounds += 1;
    for (const winner of winners) wins.set(winner, (wins.get(winner) ?? 0) + 1);
  }
  const seconds = (Date.now() - startedAt) / 1000;
  t.is(badRounds, 0, 'every round: exactly one claimed, the rest leased');
  const { rows } = await db.owner.query<{ owner: string; n: string }>(
    "SELECT lease_owner AS owner, count(*) AS n FROM cancellation_dispatches WHERE run_id LIKE $1 || '-%' AND status = 'leased' AND dispatch_count = 1 GROUP BY lease_owner ORDER BY lease_owner",
    [prefix],
  );
  t.is(
    rows.reduce((sum, row) => sum + Number(row.n), 0),
    rounds,
    'one leased record per round, dispatched once',
  );
  t.deepEqual(
    Object.fromEntries(rows.map((row) => [row.owner, Number(row.n)])),
    Object.fromEntries([...wins].sort()),
    'the database agrees on every winner',
  );
  t.log(
    `${connections} connections x ${rounds} rounds in ${seconds.toFixed(1)} s; wins: ${[...wins]
      .sort()
      .map(([owner, n]) => `${owner}=${n}`)
      .join(', ')}`,
  );
}

test.serial('pg gate 11: two connections race claim for 500 rounds and exactly one wins each round', (t) =>
  race(t, 2, 500),
);

test.serial('pg gate 11: eight connections race claim for 100 rounds and exactly one wins each round', (t) =>
  race(t, 8, 100),
);

interface WalPosition {
  readonly lsn: string;
  readonly file: string;
}

async function walPosition(db: MigratedDatabase): Promise<WalPosition> {
  const { rows } = await db.admin.query<WalPosition>(
    'SELECT lsn::text AS lsn, pg_walfile_name(lsn) AS file FROM pg_current_wal_lsn() AS lsn',
  );
  const row = rows[0];
  if (row === undefined) throw new Error('no WAL position');
  return row;
}

/**
 * Keeps every WAL segment from now on until `release()`: a temporary physical replication slot that
 * reserves WAL at once. Without it a checkpoint may recycle the segments before the scan reads them:
 * the shared server checkpoints whenever a test drops its database.
 */
async function walReserved(db: MigratedDatabase): Promise<{ release(): Promise<void> }> {
  const holder = await db.admin.connect();
  holder.on('error', () => undefined);
  await holder.query('SELECT pg_create_physical_replication_slot($1, true, true)', [
    `pidfence_gate11_${process.pid}_${randomBytes(4).toString('hex')}`,
  ]);
  return {
    release: async () => {
      holder.release(true);
    },
  };
}

/**
 * The bytes of WAL records as written, without the page headers PostgreSQL puts at the start of every
 * WAL page: a record that crosses a page boundary is split by one, and so is any text inside it (a
 * 64-character digest does in about 1 run of 130). XLP_LONG_HEADER (bit 2 of xlp_info) marks the
 * longer header of a segment's first page.
 */
function walRecordBytes(segment: Buffer, blockSize: number): Buffer {
  const pages: Buffer[] = [];
  for (let at = 0; at + blockSize <= segment.length; at += blockSize) {
    const longHeader = (segment.readUInt16LE(at + 2) & XLP_LONG_HEADER) !== 0;
    pages.push(segment.subarray(at + (longHeader ? LONG_PAGE_HEADER : SHORT_PAGE_HEADER), at + blockSize));
  }
  return Buffer.concat(pages);
}

/** Waits until the WAL up to `lsn` is on disk (the test cluster may commit asynchronously). */
async function walFlushedTo(db: MigratedDatabase, lsn: string): Promise<void> {
  const deadline = Date.now() + WAL_FLUSH_WAIT_MS;
  while (Date.now() < deadline) {
    const { rows } = await db.admin.query<{ flushed: boolean }>(
      'SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS flushed',
      [lsn],
    );
    if (rows[0]?.flushed === true) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`WAL not flushed to ${lsn} within ${WAL_FLUSH_WAIT_MS} ms`);
}

test.serial('pg gate 11: the raw token never reaches pg_dump output or the WAL; the digest does', async (t) => {
  const db = await ready;
  const pool = runtimePool(db, 2);
  t.teardown(() => pool.end());
  const repository = new PostgresDispatchRepository(pool);
  const runIds = await seedCancelledRuns(db.owner, 'walscan', 5, CANCELLED_AT_MS);
  const { rows: dirRows } = await db.admin.query<{ data_directory: string }>('SHOW data_directory');
  const walDir = path.join(dirRows[0]?.data_directory ?? '', 'pg_wal');
  const blockSize = Number(
    (await db.admin.query<{ wal_block_size: string }>('SHOW wal_block_size')).rows[0]?.wal_block_size,
  );
  const reserved = await walReserved(db);
  t.teardown(() => reserved.release());

  const start = await walPosition(db);
  const tokens: string[] = [];
  const digests: string[] = [];
  for (const [i, runId] of runIds.entries()) {
    const claim = claimOf(runId, `worker-${i}`);
    const outcome = await repository.claim(claim);
    if (outcome.kind !== 'claimed') return t.fail(outcome.kind);
    tokens.push(claim.token);
    digests.push(outcome.record.leaseTokenDigest ?? '');
    if (i % 2 === 0) {
      await repository.recordResult({
        runId,
        attemptId: claim.attemptId,
        owner: claim.owner,
        token: claim.token,
        expectedVersion: outcome.record.version,
        result: 'termination_requested',
        eventId: `${runId}-e2`,
      });
    }
  }
  const end = await walPosition(db);
  await walFlushedTo(db, end.lsn);

  // Every segment from the one holding the start to the one holding the end, read as bytes.
  const segments = readdirSync(walDir)
    .filter((name) => /^[0-9A-F]{24}$/.test(name) && name >= start.file && name <= end.file)
    .sort();
  t.true(
    segments.length >= 1 && segments[0] === start.file && segments[segments.length - 1] === end.file,
    `segments ${segments.join(', ')}`,
  );
  const wal = Buffer.concat(segments.map((name) => walRecordBytes(readFileSync(path.join(walDir, name)), blockSize)));
  const dump = Buffer.from(pgDump(adminUrlFor(db), ['--no-owner', '--no-privileges']), 'utf8');
  for (const [what, bytes] of [
    ['WAL', wal],
    ['pg_dump', dump],
  ] as const) {
    for (const token of tokens) {
      t.false(bytes.includes(Buffer.from(token, 'utf8')), `${what}: token text absent`);
      t.false(bytes.includes(Buffer.from(token, 'base64url')), `${what}: token bytes absent`);
    }
    // The scan sees stored text: the digest of a still-leased claim is there.
    t.true(bytes.includes(Buffer.from(digests[1] ?? '-', 'utf8')), `${what}: the digest of a live lease is present`);
  }

  // pg_waldump reads the same range and finds the dispatch table's records in it.
  const { rows: rel } = await db.admin.query<{ filenode: string }>(
    "SELECT pg_relation_filenode('cancellation_dispatches')::text AS filenode",
  );
  const waldump = spawnSync(
    path.join(ensureServerBinaries().binDir, 'pg_waldump'),
    [`--path=${walDir}`, `--start=${start.lsn}`, `--end=${end.lsn}`],
    { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 60_000 },
  );
  const records = waldump.stdout ?? '';
  t.regex(
    records,
    new RegExp(`rel \\d+/\\d+/${rel[0]?.filenode ?? 'x'}\\b`),
    `pg_waldump lists records of cancellation_dispatches (${(waldump.stderr ?? '').split('\n')[0]})`,
  );
  for (const token of tokens) t.false(records.includes(token));
  t.log(
    `scanned ${segments.length} WAL segment(s) ${start.lsn} → ${end.lsn}, ${records.split('\n').length} pg_waldump lines, pg_dump ${dump.length} bytes`,
  );
});

test.serial(
  'pg gate 11: the runtime role cannot DELETE, TRUNCATE or change the schema, and the store never asks to',
  async (t) => {
    const db = await ready;
    const pool = runtimePool(db);
    t.teardown(() => pool.end());
    await seedCancelledRuns(db.owner, 'priv', 1, CANCELLED_AT_MS);
    const countRows = async () =>
      (await db.owner.query<{ n: string }>('SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM attempts) AS n'))
        .rows[0]?.n;
    const before = await countRows();
    const attempts = [
      'DELETE FROM runs',
      'DELETE FROM cancellation_dispatches',
      'DELETE FROM run_events',
      'TRUNCATE runs CASCADE',
      'TRUNCATE run_events',
      'CREATE TABLE pidfence_extra (id int)',
      'ALTER TABLE runs ADD COLUMN extra int',
      'DROP TABLE run_events',
      'CREATE INDEX runs_extra ON runs (project_id)',
      'ALTER TABLE cancellation_dispatches DROP CONSTRAINT cancellation_dispatches_leased_shape',
      "CREATE FUNCTION pidfence_extra() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ];
    for (const sql of attempts) {
      const error = await t.throwsAsync(pool.query(sql), undefined, sql);
      t.is((error as { code?: string } | undefined)?.code, '42501', `${sql}: insufficient_privilege`);
    }
    t.is(await countRows(), before, 'nothing was removed');
    t.false(
      Object.values({ ...CLOCK_SQL, ...RUN_SQL, ...DISPATCH_SQL }).some((statement) =>
        /\b(DELETE|TRUNCATE|CREATE|ALTER|DROP)\b/i.test(statement),
      ),
      'no store statement deletes or changes the schema',
    );
  },
);

test.serial(
  'pg gate 11: a claim or result blocked on a held lock fails after the lock timeout, typed, and changes nothing',
  async (t) => {
    const db = await ready;
    const pool = runtimePool(db, 2);
    t.teardown(() => pool.end());
    const repository = new PostgresDispatchRepository(pool);
    const runStore = new PostgresRunStore(pool);
    const [runId = ''] = await seedCancelledRuns(db.owner, 'locked', 1, CANCELLED_AT_MS);
    const snapshot = async () => ({
      run: await runStore.getRun(runId),
      record: await repository.getRecord(runId),
      events: await runStore.listEvents(runId),
    });

    const holder = await db.owner.connect();
    t.teardown(() => holder.release());
    const expectLockTimeout = async (work: Promise<unknown>, what: string): Promise<void> => {
      const startedAt = Date.now();
      const error = await t.throwsAsync(work, { instanceOf: PidfenceError }, what);
      const waited = Date.now() - startedAt;
      t.is((error as PidfenceError).code, 'ERR_PIDFENCE_STORE_LOCK_TIMEOUT', what);
      t.is((error as PidfenceError).errno, '55P03');
      t.true(waited >= 900 && waited < 4_000, `${what}: gave up after ${waited} ms (lock_timeout 1 s)`);
      t.false(error?.message.includes(runId) ?? true);
      t.false(/SELECT|UPDATE|FOR NO KEY/.test(error?.message ?? ''), 'no SQL text');
    };

    // Lock 1 of 3 held: the claim waits on the run row.
    const before = await snapshot();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [runId]);
    const claim = claimOf(runId, 'worker-a');
    await expectLockTimeout(repository.claim(claim), 'claim');
    await holder.query('ROLLBACK');
    t.deepEqual(await snapshot(), before, 'the timed-out claim wrote nothing');

    const claimed = await repository.claim(claim);
    if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
    // Lock 3 of 3 held: the result gets run and attempt, then waits on the dispatch row.
    const leased = await snapshot();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM cancellation_dispatches WHERE run_id = $1 FOR UPDATE', [runId]);
    const result = {
      runId,
      attemptId: claim.attemptId,
      owner: claim.owner,
      token: claim.token,
      expectedVersion: claimed.record.version,
      result: 'already_exited' as const,
      eventId: `${runId}-e2`,
    };
    await expectLockTimeout(repository.recordResult(result), 'recordResult');
    await holder.query('ROLLBACK');
    t.deepEqual(await snapshot(), leased, 'the timed-out result wrote nothing');
    t.is((await repository.recordResult(result)).kind, 'recorded', 'once the lock is released the same fence settles');
  },
);
