// Migration 0009 (docs/decisions/0013) rebuilds the dispatch table and the run events with their rules
// spelt without IN lists: a database migrated to 0008 with rows in every state keeps every row, and every
// write the 0008 rules rejected (or accepted) is still rejected (or accepted) with the same code.
import test from 'ava';

import { createLeaseToken } from '../../lib/contract/index';
import { loadMigrations, migrationsDirectory } from '../../lib/store/migrations';
import {
  migrateSqliteDatabase,
  openSqliteDatabase,
  openSqliteStore,
  type SqliteDatabase,
} from '../../lib/store/sqlite/index';
import { SQL } from '../../lib/store/sqlite/prepared';
import { tempFile } from '../helpers/temp-file';
import { driverOf } from '../../lib/store/sqlite/driver';

const NOW = 1_700_000_000_000;
const DIGEST = 'ab'.repeat(32);

interface DispatchRow {
  readonly status: string;
  readonly version?: number;
  readonly count?: number;
  readonly next?: number | null;
  readonly owner?: string | null;
  readonly digest?: string | null;
  readonly expires?: number | null;
  readonly result?: string | null;
  readonly blocked?: number | null;
  readonly projectId?: string;
  readonly attemptId?: string;
}

/** One dispatch row in every status, and every last result in the status it belongs to. */
const STATES: Readonly<Record<string, DispatchRow>> = {
  pending: { status: 'pending', version: 0, count: 0, next: NOW - 10 },
  'leased-live': { status: 'leased', owner: 'w', digest: DIGEST, expires: NOW + 60_000 },
  'leased-expired': { status: 'leased', version: 3, count: 2, owner: 'w2', digest: 'cd'.repeat(32), expires: NOW - 5 },
  ...Object.fromEntries(
    ['controller_missing', 'handle_missing', 'dispatch_error'].map((result, i) => [
      `retry-${result}`,
      { status: 'retry_wait', version: 2, next: i === 0 ? NOW - 1 : NOW + 30_000, result },
    ]),
  ),
  ...Object.fromEntries(
    ['termination_requested', 'already_exited'].map((result) => [
      `dispatched-${result}`,
      { status: 'dispatched', version: 2, result },
    ]),
  ),
  ...Object.fromEntries(
    ['identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid'].map((result) => [
      `blocked-${result}`,
      { status: 'blocked', version: 2, result, blocked: NOW - 100 },
    ]),
  ),
};

const EVENT_TYPES = [
  'run.cancel_requested',
  'run.cancel_dispatched',
  'run.cancel_dispatch_blocked',
  'run.cancel_dispatch_failed',
  'run.cancel_dispatch_rearmed',
  'run.terminal',
];

function insertRunWithAttempt(db: SqliteDatabase, runId: string, nextEventSeq = 1): void {
  driverOf(db)
    .prepare(
      `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    VALUES (?, 'project-a', 'runtime', 'running', 1, ?, 'user', ?, ?, ?)`,
    )
    .run(runId, NOW - 1_000, nextEventSeq, NOW - 2_000, NOW - 1_000);
  driverOf(db)
    .prepare(
      `INSERT INTO attempts (run_id, id, status, pid, handle, created_at_ms, updated_at_ms) VALUES (?, ?, 'running', 4242, '{"v":1}', ?, ?)`,
    )
    .run(runId, `${runId}-a1`, NOW - 2_000, NOW - 2_000);
}

function insertDispatch(db: SqliteDatabase, runId: string, row: DispatchRow): unknown {
  return driverOf(db)
    .prepare(
      `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count,
      next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms, blocked_at_ms,
      created_at_ms, updated_at_ms)
    VALUES (:runId, :projectId, :attemptId, :status, :version, :count, :next, :owner, :digest, :expires, :result, :dispatched, :blocked, :at, :at)`,
    )
    .run({
      runId,
      projectId: row.projectId ?? 'project-a',
      attemptId: row.attemptId ?? `${runId}-a1`,
      status: row.status,
      version: row.version ?? 1,
      count: row.count ?? 1,
      next: row.next ?? null,
      owner: row.owner ?? null,
      digest: row.digest ?? null,
      expires: row.expires ?? null,
      result: row.result ?? null,
      dispatched: (row.count ?? 1) > 0 ? NOW - 500 : null,
      blocked: row.blocked ?? null,
      at: NOW - 1_000,
    });
}

function insertEvent(db: SqliteDatabase, runId: string, seq: number, type: string, payload = '{"n":1}'): unknown {
  return driverOf(db)
    .prepare('INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)')
    .run(runId, seq, `${runId}-e${seq}`, type, payload, NOW - 1_000 + seq);
}

/** Every rule of the two rebuilt tables, by a write it rejects, and writes it accepts; run on a run with no dispatch yet. */
const PROBES: ReadonlyArray<readonly [string, string, (db: SqliteDatabase) => unknown]> = [
  [
    'unknown status',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'done', result: 'termination_requested' }),
  ],
  [
    'pending with a lease owner',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'pending', version: 0, count: 0, next: NOW, owner: 'w' }),
  ],
  [
    'pending without due time',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'pending', version: 0, count: 0 }),
  ],
  [
    'leased without digest',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'leased', owner: 'w', expires: NOW }),
  ],
  [
    'leased never dispatched',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'leased', count: 0, owner: 'w', digest: DIGEST, expires: NOW }),
  ],
  [
    'leased with an uppercase digest',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'leased', owner: 'w', digest: 'AB'.repeat(32), expires: NOW }),
  ],
  [
    'leased with a short digest',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'leased', owner: 'w', digest: 'ab', expires: NOW }),
  ],
  [
    'dispatch count above version',
    'SQLITE_CONSTRAINT_CHECK',
    (db) =>
      insertDispatch(db, 'run-probe', {
        status: 'leased',
        version: 1,
        count: 2,
        owner: 'w',
        digest: DIGEST,
        expires: NOW,
      }),
  ],
  [
    'retry_wait without due time',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'retry_wait', result: 'dispatch_error' }),
  ],
  [
    'retry_wait without result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'retry_wait', next: NOW }),
  ],
  [
    'retry_wait with an unknown result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'retry_wait', next: NOW, result: 'nope' }),
  ],
  [
    'dispatched with a lease',
    'SQLITE_CONSTRAINT_CHECK',
    (db) =>
      insertDispatch(db, 'run-probe', {
        status: 'dispatched',
        result: 'already_exited',
        owner: 'w',
        digest: DIGEST,
        expires: NOW,
      }),
  ],
  [
    'dispatched by a retryable result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'dispatched', result: 'dispatch_error' }),
  ],
  [
    'dispatched by a blocking result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'dispatched', result: 'invalid' }),
  ],
  [
    'blocked without blocked_at_ms',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'blocked', result: 'invalid' }),
  ],
  [
    'blocked by a retryable result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'blocked', result: 'dispatch_error', blocked: NOW }),
  ],
  [
    'blocked by a successful result',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'blocked', result: 'termination_requested', blocked: NOW }),
  ],
  [
    'a negative due time',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'pending', version: 0, count: 0, next: -1 }),
  ],
  [
    'a lease owner of 129 characters',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertDispatch(db, 'run-probe', { status: 'leased', owner: 'w'.repeat(129), digest: DIGEST, expires: NOW }),
  ],
  [
    'another project than the run',
    'SQLITE_CONSTRAINT_FOREIGNKEY',
    (db) =>
      insertDispatch(db, 'run-probe', { status: 'pending', version: 0, count: 0, next: NOW, projectId: 'project-b' }),
  ],
  [
    'an attempt of no run',
    'SQLITE_CONSTRAINT_FOREIGNKEY',
    (db) => insertDispatch(db, 'run-probe', { status: 'pending', version: 0, count: 0, next: NOW, attemptId: 'nope' }),
  ],
  [
    'a second row for a run',
    'SQLITE_CONSTRAINT_PRIMARYKEY',
    (db) => insertDispatch(db, 'run-pending', { status: 'pending', version: 0, count: 0, next: NOW }),
  ],
  [
    'settling a leased row without clearing the lease',
    'SQLITE_CONSTRAINT_CHECK',
    (db) =>
      driverOf(db)
        .prepare(
          "UPDATE cancellation_dispatches SET status = 'dispatched', last_result = 'already_exited' WHERE run_id = 'run-leased-live'",
        )
        .run(),
  ],
  ['unknown event type', 'SQLITE_CONSTRAINT_CHECK', (db) => insertEvent(db, 'run-probe', 1, 'run.nope')],
  [
    'event payload not JSON',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertEvent(db, 'run-probe', 1, 'run.terminal', 'nope'),
  ],
  [
    'event payload over 1024 bytes',
    'SQLITE_CONSTRAINT_CHECK',
    (db) => insertEvent(db, 'run-probe', 1, 'run.terminal', JSON.stringify({ n: 'x'.repeat(1024) })),
  ],
  ['event seq 0', 'SQLITE_CONSTRAINT_CHECK', (db) => insertEvent(db, 'run-probe', 0, 'run.terminal')],
  ['event of no run', 'SQLITE_CONSTRAINT_FOREIGNKEY', (db) => insertEvent(db, 'run-none', 1, 'run.terminal')],
  ['event seq taken', 'SQLITE_CONSTRAINT_PRIMARYKEY', (db) => insertEvent(db, 'run-history', 1, 'run.terminal')],
  // Accepted before and after (the rule is three-valued: a NULL result passes the blocked-result list).
  ...Object.entries(STATES).map(
    ([name, row]) => [`accepts ${name}`, 'ok', (db: SqliteDatabase) => insertDispatch(db, 'run-probe', row)] as const,
  ),
  [
    'accepts blocked with no result',
    'ok',
    (db) => insertDispatch(db, 'run-probe', { status: 'blocked', blocked: NOW }),
  ],
  ...EVENT_TYPES.map(
    (type) => [`accepts ${type}`, 'ok', (db: SqliteDatabase) => insertEvent(db, 'run-probe', 1, type)] as const,
  ),
];

/** Each probe's outcome (`ok` or the SQLite code) after its name, every write rolled back. */
function probe(db: SqliteDatabase): string[] {
  return PROBES.map(([name, , write]) => {
    driverOf(db).exec('SAVEPOINT probe');
    try {
      write(db);
      return `${name}: ok`;
    } catch (error) {
      return `${name}: ${String((error as { code?: unknown }).code)}`;
    } finally {
      driverOf(db).exec('ROLLBACK TO probe; RELEASE probe');
    }
  });
}

function snapshot(db: SqliteDatabase): { dispatches: unknown[]; events: unknown[] } {
  return {
    dispatches: driverOf(db).prepare('SELECT * FROM cancellation_dispatches ORDER BY run_id').all(),
    events: driverOf(db).prepare('SELECT * FROM run_events ORDER BY run_id, seq').all(),
  };
}

/** The rebuilt tables' indexes: name, and whether partial. */
function indexesOf(db: SqliteDatabase): unknown[] {
  return ['cancellation_dispatches', 'run_events'].flatMap((table) =>
    (driverOf(db).pragma(`index_list(${table})`) as Array<{ name: string; unique: number; partial: number }>)
      .map(({ name, unique, partial }) => ({ table, name, unique, partial }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  );
}

test('0009 keeps every row of a database migrated to 0008 and every rule of its dispatch and event tables', async (t) => {
  const { file, cleanup } = tempFile('pidfence-migrate-');
  t.teardown(cleanup);
  const files = loadMigrations(migrationsDirectory('sqlite'));
  const through0008 = files.filter((f) => f.version <= 8);
  t.is(through0008.at(-1)?.name, '0008_pending_at_cancel_due_index');

  const db = openSqliteDatabase(file);
  t.teardown(() => {
    if (db.open) db.close();
  });
  t.is(migrateSqliteDatabase(db, () => NOW, through0008).length, 8);
  driverOf(db).transaction(() => {
    for (const [name, row] of Object.entries(STATES)) {
      insertRunWithAttempt(db, `run-${name}`);
      insertDispatch(db, `run-${name}`, row);
    }
    insertRunWithAttempt(db, 'run-probe');
    insertRunWithAttempt(db, 'run-history', EVENT_TYPES.length + 1);
    EVENT_TYPES.forEach((type, i) => insertEvent(db, 'run-history', i + 1, type, JSON.stringify({ type })));
  })();
  const before = snapshot(db);
  t.is(before.dispatches.length, Object.keys(STATES).length);
  t.is(before.events.length, EVENT_TYPES.length);
  const rulesBefore = probe(db);
  t.deepEqual(
    rulesBefore,
    PROBES.map(([name, expected]) => `${name}: ${expected}`),
    'the 0008 rules reject and accept what the probes say',
  );
  const indexesBefore = indexesOf(db);

  t.deepEqual(
    migrateSqliteDatabase(
      db,
      () => NOW,
      files.filter((f) => f.version <= 9),
    ),
    ['0009_rules_without_in_lists'],
  );

  t.deepEqual(snapshot(db), before, 'every row survives, byte for byte');
  t.deepEqual(
    probe(db),
    rulesBefore,
    'every write rejected before is rejected with the same code, every accepted one accepted',
  );
  t.deepEqual(indexesOf(db), indexesBefore, 'the same indexes, partial where they were');
  t.deepEqual(driverOf(db).pragma('foreign_key_check'), []);
  t.deepEqual(
    driverOf(db).pragma('integrity_check'),
    [{ integrity_check: 'ok' }],
    'partial indexes hold exactly their rows',
  );
  const schema = driverOf(db)
    .prepare(
      "SELECT name, sql FROM sqlite_schema WHERE tbl_name IN ('cancellation_dispatches', 'run_events') AND sql IS NOT NULL",
    )
    .all() as Array<{ name: string; sql: string }>;
  t.deepEqual(schema.map((row) => row.name).sort(), [
    'cancellation_dispatches',
    'cancellation_dispatches_blocked',
    'cancellation_dispatches_due',
    'run_events',
  ]);
  for (const { name, sql } of schema) t.notRegex(sql, /\bIN\s*\(/i, `${name} has no IN list left`);
  // No write of the claim + settle cycle builds a temporary index of a list any more.
  for (const write of ['leaseDispatch', 'settleDispatch', 'insertEvent'] as const) {
    const named = [...new Set([...SQL[write].matchAll(/:(\w+)/g)].map((m) => m[1] ?? ''))];
    const program = driverOf(db)
      .prepare(`EXPLAIN ${SQL[write]}`)
      .all(Object.fromEntries(named.map((n) => [n, null]))) as Array<{ opcode: string; p4: unknown }>;
    // RETURNING collects its rows in an ephemeral table without a key; an IN list's has one (k(1,B)).
    t.deepEqual(
      program.filter((op) => op.opcode === 'OpenEphemeral' && String(op.p4).startsWith('k(')),
      [],
      write,
    );
  }
  db.close();

  // The migrated file serves the due query and a claim + settle cycle.
  const store = openSqliteStore(file, { clock: () => NOW });
  t.teardown(() => store.close());
  const due = await store.dispatchRepository.duePage({ limit: 64 });
  t.deepEqual(due.items.map((item) => [item.runId, item.source]).sort(), [
    ['run-leased-expired', 'lease_expired'],
    ['run-pending', 'first_claim'],
    ['run-retry-controller_missing', 'retry_due'],
  ]);
  const token = createLeaseToken();
  const claim = {
    runId: 'run-pending',
    attemptId: 'run-pending-a1',
    cancelRequestedAtMs: NOW - 1_000,
    owner: 'w',
    token,
    leaseDurationMs: 1_000,
  };
  const claimed = await store.dispatchRepository.claim(claim);
  if (claimed.kind !== 'claimed') return t.fail(claimed.kind);
  const settled = await store.dispatchRepository.recordResult({
    runId: claim.runId,
    attemptId: claim.attemptId,
    owner: 'w',
    token,
    expectedVersion: claimed.record.version,
    result: 'termination_requested',
    eventId: 'evt-settle',
  });
  t.is(settled.kind, 'recorded');
  t.is((await store.dispatchRepository.getRecord('run-pending'))?.status, 'dispatched');
});
