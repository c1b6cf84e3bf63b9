// SqliteManagementStore (design/dispatch §5): inspect, the rearm
// transaction (BEGIN IMMEDIATE: grant re-read, CAS, RunEvent, audit), the one-statement summary,
// the blocked keyset page, and the owner's grant writes. The injected clock is the time authority.
import {
  buildDispatchEventPayload,
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
import { boundaryOf, type SqliteBoundary } from './transaction';
import type { Clock } from './clock';
import type { SqliteDatabase } from './database';
import { MANAGEMENT_SQL, type ManagementStatements } from './management-statements';
import { appendRunEvent } from './run-events';
import { selectDispatch, selectHeldRunVersion } from './rows';
import type { PreparedStatements } from './prepared';

export class SqliteManagementStore implements ManagementStore, GrantAdministration {
  readonly #boundary: SqliteBoundary;
  readonly #sql: ManagementStatements;
  readonly #statements: PreparedStatements;
  readonly #ownerSubject: string | null;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock; readonly ownerSubject?: string } = {}) {
    this.#boundary = boundaryOf(database, options.clock);
    this.#sql = this.#boundary.sql(MANAGEMENT_SQL);
    this.#statements = this.#boundary.statements;
    this.#ownerSubject = options.ownerSubject ?? null;
  }

  #guard<T>(operation: string, work: () => T): T {
    return this.#boundary.read(operation, work);
  }

  /** The store file's owner holds every grant on it (docs/decisions/0170); anyone else needs a row. */
  #held(subject: string, projectId: string, permission: Permission): boolean {
    if (subject === this.#ownerSubject) return true;
    return this.#sql.hasGrant.get({ subject, projectId, permission }) !== undefined;
  }

  async hasPermission(subject: string, projectId: string, permission: Permission): Promise<boolean> {
    return this.#guard('hasPermission', () => this.#held(subject, projectId, permission));
  }

  async inspectDispatch(runId: string): Promise<DispatchInspection | null> {
    return this.#guard('inspect', () => {
      const row = this.#sql.inspect.get(runId) as Record<string, unknown> | undefined;
      return row === undefined ? null : inspectionOf(row);
    });
  }

  async rearm(command: RearmCommand): Promise<RearmOutcome> {
    return this.#boundary.write('rearm', (nowMs) => this.#rearmLocked(command, nowMs));
  }

  /** Inside BEGIN IMMEDIATE: no other writer (a revoke included) can run until this commits. */
  #rearmLocked(command: RearmCommand, nowMs: number): RearmOutcome {
    const record = selectDispatch(this.#statements, command.runId);
    const permitted = record !== undefined && this.#held(command.subject, record.projectId, 'run.stop');
    const refusal = rearmRefusal(record, permitted, command);
    if (refusal !== null || record === undefined) return refusal ?? { kind: 'not_found' };
    const updated = this.#sql.rearm.get({
      runId: command.runId,
      expectedVersion: command.expectedVersion,
      expectedResult: command.expectedResult,
      nowMs,
    }) as Record<string, unknown> | undefined;
    if (updated === undefined) return { kind: 'stale_version', version: record.version };
    const inspection = inspectionOf(updated);
    const event = appendRunEvent(this.#statements, {
      runId: command.runId,
      version: selectHeldRunVersion(this.#statements, command.runId, 'rearm'),
      type: 'run.cancel_dispatch_rearmed',
      eventId: command.eventId,
      payload: buildDispatchEventPayload({
        attemptId: inspection.attemptId,
        dispatchCount: inspection.dispatchCount,
        result: command.expectedResult,
      }),
      nowMs,
    });
    this.#sql.insertAudit.run({
      id: command.auditId,
      runId: command.runId,
      projectId: record.projectId,
      actor: command.actor ?? command.subject,
      expectedVersion: command.expectedVersion,
      expectedResult: command.expectedResult,
      nowMs,
    });
    return { kind: 'rearmed', inspection, event };
  }

  async summaryCounts(subject: string | null, projectId: string, overdueAfterMs: number): Promise<SummaryCounts> {
    return this.#guard('summary', () => {
      const counts = summaryCountsOf(
        'sqlite',
        this.#sql.summary.get({ subject, projectId, overdueAfterMs, nowMs: this.#boundary.now() }),
      );
      return subject !== null && subject === this.#ownerSubject ? { ...counts, permitted: true } : counts;
    });
  }

  async blockedRows(projectId: string, position: BlockedPosition, limit: number): Promise<BlockedRows> {
    return this.#guard('blockedPage', () => {
      const asOfMs = position.kind === 'first' ? this.#boundary.now() : position.asOfMs;
      const after = position.kind === 'first' ? { blockedAtMs: -1, runId: '' } : position.after;
      const rows = this.#sql.blockedPage.all({
        projectId,
        asOfMs,
        afterAtMs: after.blockedAtMs,
        afterRunId: after.runId,
        limit,
      }) as Array<{ runId: string; blockedAtMs: number }>;
      return { asOfMs, rows: rows.map((row) => ({ runId: row.runId, blockedAtMs: row.blockedAtMs })) };
    });
  }

  async runRows(query: RunRowsQuery): Promise<readonly RunRow[]> {
    return this.#guard('runRows', () => {
      const params = runRowsParams(query);
      return (
        query.status === null
          ? this.#sql.runPageAll.all(params)
          : this.#sql.runPageByStatus.all({ ...params, status: query.status })
      ) as RunRow[];
    });
  }

  async runDetail(runId: string, limits: RunDetailLimits): Promise<RunDetailRows | null> {
    // One read transaction: the run, its attempts, events and dispatch as of one moment.
    return this.#boundary.snapshot('runDetail', (): RunDetailRows | null => {
      const run = this.#sql.runDetail.get({ runId }) as RunDetailRows['run'] | undefined;
      if (run === undefined) return null;
      const dispatch = this.#sql.inspect.get(runId) as Record<string, unknown> | undefined;
      return {
        run,
        attempts: this.#sql.runAttempts.all({ runId, limit: limits.attempts }) as RunDetailRows['attempts'],
        attemptEvents: this.#sql.runAttemptEvents.all({
          runId,
          limit: limits.attemptEvents,
        }) as RunDetailRows['attemptEvents'],
        events: this.#sql.runEvents.all({ runId, limit: limits.events }) as RunDetailRows['events'],
        dispatch: dispatch === undefined ? null : inspectionOf(dispatch),
      };
    });
  }

  // ---- GrantAdministration: whoever may write the file is its owner (docs/decisions/0040) ----

  async countGrants(): Promise<number> {
    return this.#guard('countGrants', () => (this.#sql.countGrants.get() as { n: number }).n);
  }

  async writeGrant(change: GrantChange, grantedBy: string): Promise<'granted' | 'exists'> {
    return this.#boundary.write('writeGrant', (nowMs) =>
      this.#sql.insertGrant.run({ ...change, grantedBy, nowMs }).changes === 1 ? 'granted' : 'exists',
    );
  }

  async revokeGrant(change: GrantChange): Promise<'revoked' | 'absent'> {
    return this.#boundary.write('revokeGrant', () =>
      this.#sql.deleteGrant.run({ ...change }).changes === 1 ? 'revoked' : 'absent',
    );
  }

  async listGrants(
    subject: string,
  ): Promise<ReadonlyArray<{ readonly projectId: string; readonly permission: Permission }>> {
    return this.#guard(
      'listGrants',
      () => this.#sql.listGrants.all(subject) as Array<{ projectId: string; permission: Permission }>,
    );
  }
}
