// The SQL text the SQLite and PostgreSQL management stores share (design/dispatch §5), built with each
// store's placeholders and clock. The row mappers and the rearm decision are in management-rows.ts;
// stores add only the transaction and the driver (docs/decisions/0410).
import { BLOCKING_RESULTS, DISPATCH_STATUSES } from '../contract/index';
import { BLOCKING_ALIASES, STATE_ALIASES } from './management-rows';
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

const countWhere = (condition: string, alias: string): string =>
  `COALESCE(SUM(CASE WHEN ${condition} THEN 1 ELSE 0 END), 0) AS "${alias}"`;

/**
 * design/dispatch §5.2-5.3: one statement returns the subject's run.read (none for a null subject: the
 * operator's metrics allowlist, docs/decisions/0112), the database time and every count,
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
    ${countWhere(`((status IN ('pending', 'retry_wait') AND next_attempt_at_ms < ${overdueBefore}) OR (status = 'leased' AND lease_expires_at_ms < ${overdueBefore})) AND ${RUN_LIVE}`, 'overdue')},
    ${countWhere(`status IN ('pending', 'leased', 'retry_wait') AND NOT ${RUN_LIVE}`, 'runEnded')},
    (${runningJobsSql(p.projectId)}) AS "running"
  FROM cancellation_dispatches WHERE project_id = ${p.projectId}`;
}

/**
 * The dispatch row's run is still queued or running (one primary-key read). A stop still pending,
 * leased or waiting to retry for a run that has ended has nothing left to stop (docs/decisions/0140):
 * it is counted apart and is neither in flight nor overdue.
 */
const RUN_LIVE = `EXISTS (SELECT 1 FROM runs WHERE runs.id = cancellation_dispatches.run_id AND runs.status IN ('queued', 'running'))`;

/**
 * The project's running jobs: its attempts in `running`. The repeated active-status term lets both
 * databases read the partial index of active attempts (as many rows as jobs are alive, whatever the
 * history), then each run by its key. EXISTS, not a join: with `runs_by_project` (docs/decisions/0140)
 * a join would let the planner walk every run the project ever had instead.
 */
function runningJobsSql(projectId: string): string {
  return `SELECT COUNT(*) FROM attempts
      WHERE attempts.status IN ('claimed', 'starting', 'running') AND attempts.status = 'running'
        AND EXISTS (SELECT 1 FROM runs WHERE runs.id = attempts.run_id AND runs.project_id = ${projectId})`;
}

/**
 * design/dispatch §5.4: one keyset page from the per-project partial index `cancellation_dispatches_blocked`
 * (project_id, blocked_at_ms, run_id) WHERE status = 'blocked'; rows blocked after the pinned
 * time never appear. `from` is the table reference (SQLite adds INDEXED BY).
 */
export function blockedPageSql(
  from: string,
  p: SqlParams<'projectId' | 'asOfMs' | 'afterAtMs' | 'afterRunId' | 'limit'>,
): string {
  return `SELECT run_id AS "runId", blocked_at_ms AS "blockedAtMs"
    FROM ${from}
    WHERE project_id = ${p.projectId} AND status = 'blocked' AND blocked_at_ms <= ${p.asOfMs}
      AND (blocked_at_ms, run_id) > (${p.afterAtMs}, ${p.afterRunId})
    ORDER BY blocked_at_ms, run_id
    LIMIT ${p.limit}`;
}

/**
 * What a stop of an attempt reaches (docs/decisions/0180), from its handle's shape only: the handle
 * itself never leaves the store. NULL before the attempt had a handle.
 */
function containmentOf(handle: string): string {
  return `CASE WHEN ${handle} IS NULL THEN NULL WHEN ${handle} LIKE '%"cgroupId":%' THEN 'cgroup' ELSE 'group' END`;
}

/**
 * A run's columns for `list` and `show` (docs/decisions/0140), for `runs AS r`: the run's own
 * low-sensitivity columns and four correlated reads, each by a key — the first attempt's creation
 * (attempts' primary key), the `run.terminal` event (run_events' key), the latest attempt's
 * `attempt.terminal` payload (attempt_events' key) and the latest attempt's containment. No PID, handle, digest or runner column.
 */
const RUN_VIEW_COLUMNS = `r.id AS "runId", r.name AS "name", r.status AS "status", r.cancel_reason AS "cancelReason",
    r.cancel_requested_at_ms AS "cancelRequestedAtMs", r.created_at_ms AS "createdAtMs",
    (SELECT MIN(a.created_at_ms) FROM attempts a WHERE a.run_id = r.id) AS "startedAtMs",
    (SELECT e.created_at_ms FROM run_events e WHERE e.run_id = r.id AND e.type = 'run.terminal' ORDER BY e.seq LIMIT 1) AS "endedAtMs",
    (SELECT ae.payload FROM attempts a JOIN attempt_events ae ON ae.attempt_id = a.id
      WHERE a.run_id = r.id AND ae.type = 'attempt.terminal' ORDER BY a.created_at_ms DESC, a.id DESC, ae.seq DESC LIMIT 1) AS "terminal",
    (SELECT ${containmentOf('a.handle')} FROM attempts a WHERE a.run_id = r.id
      ORDER BY a.created_at_ms DESC, a.id DESC LIMIT 1) AS "containment"`;

type RunPageParams = SqlParams<'projectId' | 'beforeAtMs' | 'beforeRunId' | 'limit'>;

function runPageSql(from: string, filter: string, p: RunPageParams): string {
  return `SELECT ${RUN_VIEW_COLUMNS}
    FROM ${from}
    WHERE r.project_id = ${p.projectId}${filter} AND (r.created_at_ms, r.id) < (${p.beforeAtMs}, ${p.beforeRunId})
    ORDER BY r.created_at_ms DESC, r.id DESC
    LIMIT ${p.limit}`;
}

/** A project's runs, newest first, from `runs_by_project` (project_id, created_at_ms, id). `from` names `runs AS r`. */
export function runPageAllSql(from: string, p: RunPageParams): string {
  return runPageSql(from, '', p);
}

/** The runs of one status, newest first, from `runs_by_project_status` (project_id, status, created_at_ms, id). */
export function runPageByStatusSql(from: string, p: RunPageParams & SqlParams<'status'>): string {
  return runPageSql(from, ` AND r.status = ${p.status}`, p);
}

export function runDetailSql(p: SqlParams<'runId'>): string {
  return `SELECT ${RUN_VIEW_COLUMNS}, r.project_id AS "projectId" FROM runs r WHERE r.id = ${p.runId}`;
}

export function runAttemptsSql(p: SqlParams<'runId' | 'limit'>): string {
  return `SELECT id AS "attemptId", status, deadline_at_ms AS "deadlineAtMs", created_at_ms AS "createdAtMs", updated_at_ms AS "updatedAtMs",
    ${containmentOf('handle')} AS "containment", leftovers
    FROM attempts WHERE run_id = ${p.runId} ORDER BY created_at_ms, id LIMIT ${p.limit}`;
}

export function runAttemptEventsSql(p: SqlParams<'runId' | 'limit'>): string {
  return `SELECT e.attempt_id AS "attemptId", e.seq, e.type, e.payload, e.created_at_ms AS "createdAtMs"
    FROM attempts a JOIN attempt_events e ON e.attempt_id = a.id
    WHERE a.run_id = ${p.runId} ORDER BY a.created_at_ms, a.id, e.seq LIMIT ${p.limit}`;
}

export function runEventsSql(p: SqlParams<'runId' | 'limit'>): string {
  return `SELECT NULL AS "attemptId", seq, type, payload, created_at_ms AS "createdAtMs"
    FROM run_events WHERE run_id = ${p.runId} ORDER BY seq LIMIT ${p.limit}`;
}

/** The rearm CAS (design/dispatch §5.1): the whole expectation in the WHERE clause; due at the store's now. */
export function rearmSql(p: SqlParams<'runId' | 'expectedVersion' | 'expectedResult' | 'nowMs'>): string {
  return `UPDATE cancellation_dispatches
    SET status = 'retry_wait', version = version + 1, next_attempt_at_ms = ${p.nowMs}, blocked_at_ms = NULL, updated_at_ms = ${p.nowMs}
    WHERE run_id = ${p.runId} AND status = 'blocked' AND version = ${p.expectedVersion} AND last_result = ${p.expectedResult}
    RETURNING ${INSPECTION_COLUMNS}`;
}

export function insertAuditSql(
  p: SqlParams<'id' | 'runId' | 'projectId' | 'actor' | 'expectedVersion' | 'expectedResult' | 'nowMs'>,
): string {
  return `INSERT INTO management_audit (id, run_id, project_id, action, actor, expected_version, expected_result, created_at_ms)
    VALUES (${p.id}, ${p.runId}, ${p.projectId}, 'rearm', ${p.actor}, ${p.expectedVersion}, ${p.expectedResult}, ${p.nowMs})`;
}
