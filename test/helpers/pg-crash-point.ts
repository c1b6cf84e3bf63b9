// A crash point inside the function production calls (docs/decisions/0033): a test-only trigger
// parks pidfence_record_result(s) right after its dispatch UPDATE, on an advisory lock the test
// holds, so the test can kill the backend or the server while that very transaction is open. The
// trigger is installed by the test (as the database owner) for one run and dropped afterwards.
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

function triggerName(runId: string): string {
  return `pidfence_test_crash_${runId.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`.slice(0, 63);
}

async function installTrigger(admin: Pool, runId: string): Promise<string> {
  const name = triggerName(runId);
  // lock_timeout is set by pidfence_set_limits for the transaction; the parked wait must outlast it.
  await admin.query(`CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('lock_timeout', '0', true);
  PERFORM pg_advisory_xact_lock_shared(${CRASH_POINT_LOCK_KEY});
  RETURN NEW;
END
$$`);
  await admin.query(`CREATE TRIGGER ${name} AFTER UPDATE ON cancellation_dispatches FOR EACH ROW
    WHEN (NEW.run_id = ${quoteLiteral(runId)} AND NEW.status <> 'leased')
    EXECUTE FUNCTION ${name}()`);
  return name;
}

function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

async function parkedBackend(admin: Pool): Promise<ParkedBackend | null> {
  const { rows } = await admin.query<{ pid: number; query: string }>(
    `SELECT l.pid, a.query FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid::bigint = $1::bigint`,
    [CRASH_POINT_LOCK_KEY],
  );
  const row = rows[0];
  return row === undefined ? null : { processId: row.pid, query: row.query };
}

/**
 * Installs the trigger for `runId` and takes the lock it waits on. The next settle of that run's
 * dispatch parks until `remove()`; an action on the parked backend (pg_terminate_backend, a server
 * stop) is a crash of the production function between its dispatch UPDATE and the run CAS.
 */
export async function crashPointAfterDispatchUpdate(admin: Pool, runId: string): Promise<CrashPoint> {
  const name = await installTrigger(admin, runId);
  const holder: PoolClient = await admin.connect();
  holder.on('error', () => undefined);
  await holder.query('SELECT pg_advisory_lock($1)', [CRASH_POINT_LOCK_KEY]);
  let removed = false;
  return {
    async parked() {
      return untilValue(async () => (await parkedBackend(admin)) ?? undefined, {
        timeoutMs: PARKED_WITHIN_MS,
        intervalMs: 5,
        what: 'a backend parked after its dispatch UPDATE',
      });
    },
    async remove() {
      if (removed) return;
      removed = true;
      await holder.query('SELECT pg_advisory_unlock($1)', [CRASH_POINT_LOCK_KEY]).catch(() => undefined);
      holder.release(true);
      await admin.query(`DROP TRIGGER IF EXISTS ${name} ON cancellation_dispatches`).catch(() => undefined);
      await admin.query(`DROP FUNCTION IF EXISTS ${name}()`).catch(() => undefined);
    },
  };
}
