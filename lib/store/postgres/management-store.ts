// PostgresManagementStore (design/dispatch §5): inspect, the rearm
// transaction (run lock → dispatch lock, grant re-read, CAS, RunEvent, audit), the one-statement
// summary and the blocked keyset page, with transaction_timestamp() as the only clock. Grant writes
// run on the migration owner's connection (PostgresGrantAdministration).
import type { Pool, QueryResultRow as QueryRow } from 'pg';

import {
  buildDispatchEventPayload,
  validateDispatchRecord,
  type BlockedItem,
  type DispatchInspection,
  type Permission,
  type RearmCommand,
  type RearmOutcome,
  type SummaryCounts,
} from '../../contract/index';
import type {
  BlockedPosition,
  BlockedRows,
  GrantAdministration,
  GrantChange,
  ManagementStore,
  RunDetailLimits,
  RunDetailRows,
  RunRow,
  RunRowsQuery,
} from '../management-store';
import { inspectionOf, rearmRefusal, runRowsParams, summaryCountsOf } from '../management-rows';
import { poolFor, type PostgresTarget } from './connection';
import { MANAGEMENT_SQL } from './management-statements';
import { appendRunEvent, lockRun } from './run-events';
import { CLOCK_SQL } from './clock-statements';
import { DISPATCH_SQL } from './dispatch-statements';
import { inTransaction, type Tx } from './transaction';

async function held(tx: Tx, subject: string, projectId: string, permission: Permission): Promise<boolean> {
  return (await tx.rows(MANAGEMENT_SQL.hasGrant, [subject, projectId, permission])).length > 0;
}

export class PostgresManagementStore implements ManagementStore {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async hasPermission(subject: string, projectId: string, permission: Permission): Promise<boolean> {
    return inTransaction(this.#pool, 'hasPermission', (tx) => held(tx, subject, projectId, permission));
  }

  async inspectDispatch(runId: string): Promise<DispatchInspection | null> {
    const [row] = await inTransaction(this.#pool, 'inspect', (tx) => tx.rows(MANAGEMENT_SQL.inspect, [runId]));
    return row === undefined ? null : inspectionOf(row);
  }

  async rearm(command: RearmCommand): Promise<RearmOutcome> {
    return inTransaction(this.#pool, 'rearm', (tx) => this.#rearmLocked(tx, command));
  }

  /**
   * Locks Run → Dispatch (the order of claim and result). The grant is re-read here, after the
   * up-front check: a revoke committed before this statement fails the rearm closed.
   */
  async #rearmLocked(tx: Tx, command: RearmCommand): Promise<RearmOutcome> {
    const run = await lockRun(tx, command.runId);
    if (run === undefined) return { kind: 'not_found' };
    const [row] = await tx.rows(DISPATCH_SQL.lockDispatch, [command.runId]);
    const record = row === undefined ? undefined : validateDispatchRecord(row);
    const permitted = record !== undefined && (await held(tx, command.subject, record.projectId, 'run.stop'));
    const refusal = rearmRefusal(record, permitted, command);
    if (refusal !== null || record === undefined) return refusal ?? { kind: 'not_found' };
    const [updated] = await tx.rows(MANAGEMENT_SQL.rearm, [
      command.runId,
      command.expectedVersion,
      command.expectedResult,
      run.nowMs,
    ]);
    if (updated === undefined) return { kind: 'stale_version', version: record.version };
    const inspection = inspectionOf(updated);
    const { event } = await appendRunEvent(tx, run, {
      type: 'run.cancel_dispatch_rearmed',
      eventId: command.eventId,
      payload: buildDispatchEventPayload({
        attemptId: inspection.attemptId,
        dispatchCount: inspection.dispatchCount,
        result: command.expectedResult,
      }),
    });
    await tx.rows(MANAGEMENT_SQL.insertAudit, [
      command.auditId,
      command.runId,
      record.projectId,
      command.actor ?? command.subject,
      command.expectedVersion,
      command.expectedResult,
      run.nowMs,
    ]);
    return { kind: 'rearmed', inspection, event };
  }

  async summaryCounts(subject: string | null, projectId: string, overdueAfterMs: number): Promise<SummaryCounts> {
    const [row] = await inTransaction(this.#pool, 'summary', (tx) =>
      tx.rows(MANAGEMENT_SQL.summary, [subject, projectId, overdueAfterMs]),
    );
    return summaryCountsOf('postgres', row);
  }

  async blockedRows(projectId: string, position: BlockedPosition, limit: number): Promise<BlockedRows> {
    return inTransaction(this.#pool, 'blockedPage', async (tx) => {
      const asOfMs =
        position.kind === 'first'
          ? ((await tx.rows<{ nowMs: number }>(CLOCK_SQL.now, []))[0]?.nowMs ?? 0)
          : position.asOfMs;
      const after = position.kind === 'first' ? { blockedAtMs: -1, runId: '' } : position.after;
      const rows = await tx.rows<BlockedItem>(MANAGEMENT_SQL.blockedPage, [
        projectId,
        asOfMs,
        after.blockedAtMs,
        after.runId,
        limit,
      ]);
      return { asOfMs, rows: rows.map((item) => ({ runId: item.runId, blockedAtMs: item.blockedAtMs })) };
    });
  }

  async runRows(query: RunRowsQuery): Promise<readonly RunRow[]> {
    const { projectId, beforeAtMs, beforeRunId, limit } = runRowsParams(query);
    const page = [projectId, beforeAtMs, beforeRunId, limit];
    return inTransaction(this.#pool, 'runRows', (tx) =>
      query.status === null
        ? tx.rows<RunRow & QueryRow>(MANAGEMENT_SQL.runPageAll, page)
        : tx.rows<RunRow & QueryRow>(MANAGEMENT_SQL.runPageByStatus, [...page, query.status]),
    );
  }

  async runDetail(runId: string, limits: RunDetailLimits): Promise<RunDetailRows | null> {
    return inTransaction(this.#pool, 'runDetail', async (tx) => {
      const [run] = await tx.rows<RunDetailRows['run'] & QueryRow>(MANAGEMENT_SQL.runDetail, [runId]);
      if (run === undefined) return null;
      const [dispatch] = await tx.rows(MANAGEMENT_SQL.inspect, [runId]);
      return {
        run,
        attempts: await tx.rows<RunDetailRows['attempts'][number] & QueryRow>(MANAGEMENT_SQL.runAttempts, [
          runId,
          limits.attempts,
        ]),
        attemptEvents: await tx.rows<RunDetailRows['attemptEvents'][number] & QueryRow>(
          MANAGEMENT_SQL.runAttemptEvents,
          [runId, limits.attemptEvents],
        ),
        events: await tx.rows<RunDetailRows['events'][number] & QueryRow>(MANAGEMENT_SQL.runEvents, [
          runId,
          limits.events,
        ]),
        dispatch: dispatch === undefined ? null : inspectionOf(dispatch),
      };
    });
  }
}

/** Grant writes on the migration owner's connection (docs/decisions/0040); the runtime role is refused by the database. */
export class PostgresGrantAdministration implements GrantAdministration {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async hasPermission(subject: string, projectId: string, permission: Permission): Promise<boolean> {
    return inTransaction(this.#pool, 'hasPermission', (tx) => held(tx, subject, projectId, permission));
  }

  async countGrants(): Promise<number> {
    const [row] = await inTransaction(this.#pool, 'countGrants', (tx) =>
      tx.rows<{ n: number }>(MANAGEMENT_SQL.countGrants, []),
    );
    return row?.n ?? 0;
  }

  async writeGrant(change: GrantChange, grantedBy: string): Promise<'granted' | 'exists'> {
    const rows = await inTransaction(this.#pool, 'writeGrant', (tx) =>
      tx.rows(MANAGEMENT_SQL.insertGrant, [change.subject, change.projectId, change.permission, grantedBy]),
    );
    return rows.length === 1 ? 'granted' : 'exists';
  }

  async revokeGrant(change: GrantChange): Promise<'revoked' | 'absent'> {
    const rows = await inTransaction(this.#pool, 'revokeGrant', (tx) =>
      tx.rows(MANAGEMENT_SQL.deleteGrant, [change.subject, change.projectId, change.permission]),
    );
    return rows.length === 1 ? 'revoked' : 'absent';
  }

  async listGrants(
    subject: string,
  ): Promise<ReadonlyArray<{ readonly projectId: string; readonly permission: Permission }>> {
    return inTransaction(this.#pool, 'listGrants', (tx) =>
      tx.rows<{ projectId: string; permission: Permission }>(MANAGEMENT_SQL.listGrants, [subject]),
    );
  }

  /** The owner's login role: who writes the grants (docs/decisions/0044). */
  authenticatedSubject(): Promise<string> {
    return sessionUserOf(this.#pool);
  }
}

/** The login role of the pool's connections (session_user, not a SET ROLE): the authenticated principal. */
export async function sessionUserOf(pool: Pool): Promise<string> {
  const [row] = await inTransaction(pool, 'sessionUser', (tx) =>
    tx.rows<{ name: string }>(MANAGEMENT_SQL.sessionUser, []),
  );
  return row?.name ?? '';
}

/** Grant writes as the migration owner, on the owner's pool or URL; close() ends a pool made here. */
export function openPostgresGrantAdministration(
  ownerTarget: PostgresTarget,
): PostgresGrantAdministration & { close(): Promise<void> } {
  const handle = poolFor(ownerTarget, 1);
  const administration = new PostgresGrantAdministration(handle.pool) as PostgresGrantAdministration & {
    close(): Promise<void>;
  };
  administration.close = () => handle.release();
  return administration;
}
