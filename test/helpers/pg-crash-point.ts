// A crash point inside the statements production runs (docs/decisions/0033, 0310): a test-only
// trigger parks a transaction right after one UPDATE (pidfence_record_result(s)'s dispatch UPDATE,
// an attempt's handle commit) on an advisory lock the test holds, so the test can kill the backend,
// the server or the runner while that very transaction is open. The trigger is installed by the
// test (as the database owner) and dropped afterwards.
import type { Pool, PoolClient } from 'pg';

import { untilValue } from './wait';

/** The advisory lock the trigger waits on; any fixed key no product code uses. */
const CRASH_POINT_LOCK_KEY = 845_203_011;
/** How long the test waits to see the production statement parked on the lock. */
const PARKED_WITHIN_MS = 4_000;

export interface ParkedBackend {
  /** The backend that runs the production statement, parked after its dispatch UPDATE. */
  readonly processId: number;
  /** That backend's statement text, as pg_stat_activity shows it. */
  readonly query: string;
}

export interface CrashPoint {
  /** Resolves once a backend is parked in the trigger (the production statement is mid-transaction). */
  parked(): Promise<ParkedBackend>;
  /** Releases the lock and drops the trigger; safe to call twice and after the server went away. */
  remove(): Promise<void>;
}

/** Where a crash point parks: after one row's UPDATE of `table` that matches `when` (a trigger's WHEN). */
interface ParkAt {
  readonly name: string;
  readonly table: string;
  readonly when: string;
  /** What the test waits for, in its timeout message. */
  readonly what: string;
}

function triggerName(runId: string): string {
  return `pidfence_test_crash_${runId.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`.slice(0, 63);
}

async function installTrigger(admin: Pool, at: ParkAt): Promise<void> {
  // lock_timeout is set by pidfence_set_limits for the transaction; the parked wait must outlast it.
  await admin.query(`CREATE OR REPLACE FUNCTION ${at.name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('lock_timeout', '0', true);
  PERFORM pg_advisory_xact_lock_shared(${CRASH_POINT_LOCK_KEY});
  RETURN NEW;
END
$$`);
  await admin.query(`CREATE TRIGGER ${at.name} AFTER UPDATE ON ${at.table} FOR EACH ROW
    WHEN (${at.when})
    EXECUTE FUNCTION ${at.name}()`);
}

function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** Advisory locks are per database: only a backend of this one counts. */
async function parkedBackend(admin: Pool): Promise<ParkedBackend | null> {
  const { rows } = await admin.query<{ pid: number; query: string }>(
    `SELECT l.pid, a.query FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid::bigint = $1::bigint
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [CRASH_POINT_LOCK_KEY],
  );
  const row = rows[0];
  return row === undefined ? null : { processId: row.pid, query: row.query };
}

/** Installs the trigger and takes the lock it waits on: the next matching UPDATE parks until `remove()`. */
async function crashPointAt(admin: Pool, at: ParkAt): Promise<CrashPoint> {
  await installTrigger(admin, at);
  const holder: PoolClient = await admin.connect();
  holder.on('error', () => undefined);
  await holder.query('SELECT pg_advisory_lock($1)', [CRASH_POINT_LOCK_KEY]);
  let removed = false;
  return {
    async parked() {
      return untilValue(async () => (await parkedBackend(admin)) ?? undefined, {
        timeoutMs: PARKED_WITHIN_MS,
        intervalMs: 5,
        what: at.what,
      });
    },
    async remove() {
      if (removed) return;
      removed = true;
      await holder.query('SELECT pg_advisory_unlock($1)', [CRASH_POINT_LOCK_KEY]).catch(() => undefined);
      holder.release(true);
      await admin.query(`DROP TRIGGER IF EXISTS ${at.name} ON ${at.table}`).catch(() => undefined);
      await admin.query(`DROP FUNCTION IF EXISTS ${at.name}()`).catch(() => undefined);
    },
  };
}

/**
 * The next settle of `runId`'s dispatch parks until `remove()`; an action on the parked backend
 * (pg_terminate_backend, a server stop) is a crash of the production function between its dispatch
 * UPDATE and the run CAS.
 */
export function crashPointAfterDispatchUpdate(admin: Pool, runId: string): Promise<CrashPoint> {
  return crashPointAt(admin, {
    name: triggerName(runId),
    table: 'cancellation_dispatches',
    when: `NEW.run_id = ${quoteLiteral(runId)} AND NEW.status <> 'leased'`,
    what: 'a backend parked after its dispatch UPDATE',
  });
}

/**
 * The next commit of an attempt's handle (`starting` → `running`) parks until `remove()`: the
 * runner is then between its launcher's spawn and the stored handle (docs/decisions/0310).
 */
export function crashPointAtHandleCommit(admin: Pool): Promise<CrashPoint> {
  return crashPointAt(admin, {
    name: 'pidfence_test_crash_handle_commit',
    table: 'attempts',
    when: `OLD.status = 'starting' AND NEW.status = 'running'`,
    what: "a backend parked in an attempt's handle commit",
  });
}
