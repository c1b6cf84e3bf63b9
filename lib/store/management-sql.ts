// What the SQLite and PostgreSQL management stores share (design/dispatch §5): the
// SQL text (built with each store's placeholders and clock), the row mappers and the rearm decision.
// Stores add only the transaction and the driver, like dispatch-decisions.ts for the dispatch repository.
import {
  BLOCKING_RESULTS,
  DISPATCH_STATUSES,
  INSPECTION_KEYS,
  type BlockingCounts,
  type CancellationDispatchRecord,
  type DispatchInspection,
  type RearmCommand,
  type RearmOutcome,
  type StateCounts,
  type SummaryCounts,
} from '../contract/index';
import type { SqlParams } from './sql-params';

const INSPECTION_COLUMNS = `run_id AS "runId", project_id AS "projectId", attempt_id AS "attemptId", status, version,
  dispatch_count AS "dispatchCount", last_result AS "lastResult", next_attempt_at_ms AS "nextAttemptAtMs",
  blocked_at_ms AS "blockedAtMs", last_dispatched_at_ms AS "lastDispatchedAtMs", updated_at_ms AS "updatedAtMs"`;

/** Only the low-sensitivity columns are ever selected: lease owner and digest never leave the table. */
export function inspectSql(p: SqlParams<'runId'>): string {
  return `SELECT ${INSPECTION_COLUMNS} FROM cancellation_dispatches WHERE run_id = ${p.runId}`;
}

export function hasGrantSql(p: SqlParams<'subject' | 'projectId' | 'permission'>): string {
  return `SELECT 1 AS held FROM management_grants WHERE subject = ${p.subject} AND project_id = ${p.projectId} AND permission = ${p.permission}`;
}

const STATE_ALIASES: Readonly<Record<string, string>> = { pending: 'pending', leased: 'leased', retry_wait: 'retryWait', dispatched: 'dispatched', blocked: 'blocked' };
const BLOCKING_ALIASES: Readonly<Record<string, string>> = { identity_mismatch: 'identityMismatch', pid_mismatch: 'pidMismatch', unsupported: 'unsupported', invalid: 'invalid' };

const countWhere = (condition: string, alias: string): string => `COALESCE(SUM(CASE WHEN ${condition} THEN 1 ELSE 0 END), 0) AS "${alias}"`;

/**
 * design/dispatch §5.2-5.3: one statement returns the subject's run.read, the database time and every count,
 * so `pidfence status` sends exactly one query. Blocking results are counted among blocked rows only,
 * which is what makes the cross-check (they add up to `blocked`) meaningful.
 */
export function summarySql(p: SqlParams<'subject' | 'projectId' | 'overdueAfterMs' | 'nowMs'>): string {
  const overdueBefore = `(${p.nowMs} - ${p.overdueAfterMs})`;
  return `SELECT
    (SELECT COUNT(*) FROM management_grants WHERE subject = ${p.subject} AND project_id = ${p.projectId} AND permission = 'run.read') AS "permitted",
    ${p.nowMs} AS "asOfMs",
    COUNT(*) AS "total",
    ${DISPATCH_STATUSES.map((status) => countWhere(`status = '${status}'`, STATE_ALIASES[status] ?? status)).join(',\n    ')},
    ${BLOCKING_RESULTS.map((result) => countWhere(`status = 'blocked' AND last_result = '${result}'`, BLOCKING_ALIASES[result] ?? result)).join(',\n    ')},
    ${countWhere(`(status IN ('pending', 'retry_wait') AND next_attempt_at_ms < ${overdueBefore}) OR (status = 'leased' AND lease_expires_at_ms < ${overdueBefore})`, 'overdue')}
  FROM cancellation_dispatches WHERE project_id = ${p.projectId}`;
}

/**
 * design/dispatch §5.4: one keyset page from the per-project partial index `cancellation_dispatches_blocked`
 * (project_id, blocked_at_ms, run_id) WHERE status = 'blocked'; rows blocked after the pinned
 * time never appear. `from` is the table reference (SQLite adds INDEXED BY).
 */
export function blockedPageSql(from: string, p: SqlParams<'projectId' | 'asOfMs' | 'afterAtMs' | 'afterRunId' | 'limit'>): string {
  return `SELECT run_id AS "runId", blocked_at_ms AS "blockedAtMs"
    FROM ${from}
    WHERE project_id = ${p.projectId} AND status = 'blocked' AND blocked_at_ms <= ${p.asOfMs}
      AND (blocked_at_ms, run_id) > (${p.afterAtMs}, ${p.afterRunId})
    ORDER BY blocked_at_ms, run_id
    LIMIT ${p.limit}`;
}

/** The rearm CAS (design/dispatch §5.1): the whole expectation in the WHERE clause; due at the store's now. */
export function rearmSql(p: SqlParams<'runId' | 'expectedVersion' | 'expectedResult' | 'nowMs'>): string {
  return `UPDATE cancellation_dispatches
    SET status = 'retry_wait', version = version + 1, next_attempt_at_ms = ${p.nowMs}, blocked_at_ms = NULL, updated_at_ms = ${p.nowMs}
    WHERE run_id = ${p.runId} AND status = 'blocked' AND version = ${p.expectedVersion} AND last_result = ${p.expectedResult}
    RETURNING ${INSPECTION_COLUMNS}`;
}

export function insertAuditSql(p: SqlParams<'id' | 'runId' | 'projectId' | 'actor' | 'expectedVersion' | 'expectedResult' | 'nowMs'>): string {
  return `INSERT INTO management_audit (id, run_id, project_id, action, actor, expected_version, expected_result, created_at_ms)
    VALUES (${p.id}, ${p.runId}, ${p.projectId}, 'rearm', ${p.actor}, ${p.expectedVersion}, ${p.expectedResult}, ${p.nowMs})`;
}

/** Keeps exactly the inspection keys of a row (a driver may add nothing, but a mapper never leaks). */
export function inspectionOf(row: Readonly<Record<string, unknown>>): DispatchInspection {
  const picked: Record<string, unknown> = {};
  for (const key of INSPECTION_KEYS) picked[key] = row[key];
  return picked as unknown as DispatchInspection;
}

function count(row: Readonly<Record<string, unknown>>, alias: string): number {
  const value = Number(row[alias]);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`summary column ${alias} is not a count`);
  return value;
}

export function summaryCountsOf(row: Readonly<Record<string, unknown>>): SummaryCounts {
  const states = Object.fromEntries(DISPATCH_STATUSES.map((status) => [status, count(row, STATE_ALIASES[status] ?? status)])) as unknown as StateCounts;
  const blockingResults = Object.fromEntries(BLOCKING_RESULTS.map((result) => [result, count(row, BLOCKING_ALIASES[result] ?? result)])) as unknown as BlockingCounts;
  return { permitted: count(row, 'permitted') > 0, asOfMs: count(row, 'asOfMs'), total: count(row, 'total'), states, blockingResults, overdue: count(row, 'overdue') };
}

/**
 * The rearm decision on the record read under the store's lock, with the grant re-read in the same
 * transaction: `null` means go ahead with the CAS, anything else is the outcome (nothing written).
 */
export function rearmRefusal(record: CancellationDispatchRecord | undefined, permitted: boolean, command: RearmCommand): RearmOutcome | null {
  if (record === undefined) return { kind: 'not_found' };
  if (!permitted) return { kind: 'not_permitted' };
  if (record.version !== command.expectedVersion) return { kind: 'stale_version', version: record.version };
  if (record.status !== 'blocked') return { kind: 'not_blocked', status: record.status };
  if (record.lastResult !== command.expectedResult) return { kind: 'result_mismatch', lastResult: record.lastResult };
  return null;
}
