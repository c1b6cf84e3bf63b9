// The worker fleet in PostgreSQL (docs/decisions/0240, 0241, 0245): the hold read on every request,
// a worker's announcement, an operator's act (row lock, state, audit row, and for a revocation the
// end of the name's sessions, in one transaction) and the fleet read behind one function.
import { randomUUID } from 'node:crypto';

import type { Pool } from 'pg';

import {
  heldAfter,
  workerStateOf,
  WORKER_LIST_MAX,
  type WorkerAction,
  type WorkerActionOutcome,
  type WorkerAdmission,
  type WorkerAnnouncement,
  type WorkerFleet,
  type WorkerHold,
  type WorkerView,
} from '../../contract/index';
import { FLEET_SQL } from './fleet-statements';
import { inOneStatement, inTransaction, readInOneStatement } from './transaction';

/** A drain asks at most this many runs to stop per act; a worker holds far fewer (its capacity). */
export const DRAIN_RUNS_MAX = 1_024;

const ACTIVE: WorkerHold = { admission: 'active', revoked: false };

interface HoldRow {
  readonly admission: WorkerAdmission;
  readonly revoked: boolean;
}

interface FleetRow {
  readonly name: string;
  readonly admission: WorkerAdmission | null;
  readonly revokedAtMs: number | null;
  readonly version: string | null;
  readonly capacity: number | null;
  readonly sessions: number;
  readonly lastSeenAtMs: number | null;
  readonly leasesHeld: number;
  readonly runsUnreachable: number;
  readonly nowMs: number;
}

export type WorkerActResult =
  | { readonly kind: 'not_found' }
  | {
      readonly kind: 'done';
      readonly outcome: Omit<WorkerActionOutcome, 'stopsRequested'>;
      readonly heldRuns: readonly string[];
    };

function holdOf(row: HoldRow | undefined): WorkerHold {
  return row === undefined ? ACTIVE : { admission: row.admission, revoked: row.revoked };
}

function viewOf(row: FleetRow): WorkerView {
  const hold = row.admission === null ? ACTIVE : { admission: row.admission, revoked: row.revokedAtMs !== null };
  return {
    name: row.name,
    version: row.version,
    state: workerStateOf(hold, row.leasesHeld),
    sessions: row.sessions,
    lastHeartbeatAgeMs: row.lastSeenAtMs === null ? null : Math.max(0, row.nowMs - row.lastSeenAtMs),
    leasesHeld: row.leasesHeld,
    runsUnreachable: Number(row.runsUnreachable),
    capacity: row.capacity,
    revokedAtMs: row.revokedAtMs,
  };
}

/**
 * The fleet as the session and lease tables hold it today (design/cluster §D1: the worker's own
 * requests are its heartbeat). The one read `pidfence workers`, the status page and the metrics use,
 * so a new heartbeat source changes this function only.
 */
export async function readWorkerFleet(pool: Pool, limit: number = WORKER_LIST_MAX): Promise<WorkerFleet> {
  const rows = await readInOneStatement<FleetRow>(pool, 'readWorkerFleet', {
    name: undefined,
    text: FLEET_SQL.fleet,
    values: [limit + 1],
  });
  const asOfMs =
    rows[0]?.nowMs ??
    (
      await readInOneStatement<{ nowMs: number }>(pool, 'readWorkerFleet', {
        name: undefined,
        text: FLEET_SQL.nowMs,
        values: [],
      })
    )[0]?.nowMs ??
    0;
  return { asOfMs, workers: rows.slice(0, limit).map(viewOf), truncated: rows.length > limit };
}

/** The audit row of the latest forget of `name` (docs/decisions/0271), if it was ever forgotten. */
export async function readLastForgetAudit(
  pool: Pool,
  name: string,
): Promise<{ readonly outcome: 'changed' | 'unchanged'; readonly revision: string } | undefined> {
  const [audit] = (
    await pool.query<{ outcome: 'changed' | 'unchanged'; revision: string }>(FLEET_SQL.lastForgetAudit, [name])
  ).rows;
  return audit;
}

export class PostgresFleetStore {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** The hold of a worker name: one primary-key read as its own statement, no write. */
  async hold(name: string): Promise<WorkerHold> {
    const [row] = await readInOneStatement<HoldRow>(this.#pool, 'workerHold', {
      name: 'pidfence_worker_hold',
      text: FLEET_SQL.hold,
      values: [name],
    });
    return holdOf(row);
  }

  /** The hold once any operator's act in flight on this worker has committed (its row lock waited for). */
  async holdAfterActs(name: string): Promise<WorkerHold> {
    const [row] = await inTransaction(this.#pool, 'workerHoldForShare', (tx) =>
      tx.rows<HoldRow>(FLEET_SQL.holdForShare, [name]),
    );
    return holdOf(row);
  }

  /** A pull held back by a cordon still touches the session, as the pull would; false when it is closed. */
  async touchSession(name: string, sessionId: string): Promise<boolean> {
    return (
      (
        await inOneStatement(this.#pool, 'workerTouch', {
          name: undefined,
          text: FLEET_SQL.touchSession,
          values: [sessionId, name],
        })
      ).length === 1
    );
  }

  async ownsSession(name: string, sessionId: string): Promise<boolean> {
    return (
      (
        await readInOneStatement(this.#pool, 'workerSession', {
          name: undefined,
          text: FLEET_SQL.sessionOf,
          values: [sessionId, name],
        })
      ).length === 1
    );
  }

  /** What the worker announced of itself; answers its hold. */
  async announce(name: string, announcement: WorkerAnnouncement): Promise<WorkerHold> {
    const [row] = await inTransaction(this.#pool, 'workerAnnounce', (tx) =>
      tx.rows<HoldRow>(FLEET_SQL.announce, [name, announcement.version, announcement.capacity]),
    );
    return holdOf(row);
  }

  /**
   * One operator's act, serialised on the worker's row: the new hold (cordon and drain only narrow
   * it), the audit row (also when nothing changed), a revocation's end of the name's sessions, and for
   * a draining worker the runs it holds, all in one transaction.
   */
  async act(name: string, action: WorkerAction, actor: string): Promise<WorkerActResult> {
    return inTransaction(this.#pool, 'workerAct', async (tx) => {
      const [known] = await tx.rows<{ known: boolean }>(FLEET_SQL.known, [name]);
      if (known?.known !== true) return { kind: 'not_found' };
      await tx.rows(FLEET_SQL.ensureRow, [name]);
      const [row] = await tx.rows<HoldRow & { revision: number; nowMs: number }>(FLEET_SQL.lockRow, [name]);
      if (row === undefined) throw new Error('the worker row vanished under its lock');
      const before = holdOf(row);
      const after = heldAfter(before, action);
      const changed = after.admission !== before.admission || after.revoked !== before.revoked;
      const [written] = changed
        ? await tx.rows<{ revision: number }>(FLEET_SQL.writeHold, [name, after.admission, after.revoked, row.nowMs])
        : [row];
      const revision = written?.revision ?? row.revision;
      if (action === 'revoke') await tx.rows(FLEET_SQL.endSessionsOf, [name, row.nowMs]);
      const heldRuns =
        after.admission === 'draining'
          ? (await tx.rows<{ runId: string }>(FLEET_SQL.heldRunsOf, [name, DRAIN_RUNS_MAX])).map((held) => held.runId)
          : [];
      const outcome = changed ? 'changed' : 'unchanged';
      await tx.rows(FLEET_SQL.insertAudit, [`wau-${randomUUID()}`, name, action, actor, outcome, revision, row.nowMs]);
      return {
        kind: 'done',
        outcome: { name, action, outcome, state: workerStateOf(after, heldRuns.length), revision },
        heldRuns,
      };
    });
  }
}
