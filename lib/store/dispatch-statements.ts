// What the SQLite and PostgreSQL dispatch stores share (docs/decisions/0022): the pending dispatch
// written when a cancellation meets an active attempt, and the due query read from one index on
// the dispatch table. Stores pass their placeholders, clock and index hint.
import type { SqlParams } from './sql-params';

const ACTIVE_ATTEMPT = `('claimed', 'starting', 'running')`;

/** The due time of a row in the due index: the retry/first-claim time, or the lease expiry. */
export const DUE_AT = 'COALESCE(d.next_attempt_at_ms, d.lease_expires_at_ms)';

/**
 * design/dispatch §2.2 step 3: the `pending` dispatch of a cancelled runtime run's active attempt,
 * due at the cancel-request time. Written by the cancel request and by an attempt created after it,
 * in their transaction. A row that exists is kept, except a pending row never claimed whose attempt
 * was replaced: it moves to the new attempt, as if it were written now (nothing was ever sent).
 * SQLite's text only: PostgreSQL's one home is migration 0018's set function, which states this rule
 * for a set of runs (docs/decisions/0340).
 */
export function insertPendingDispatchSql(p: SqlParams<'runId' | 'nowMs'>): string {
  return `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count,
      next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result, last_dispatched_at_ms,
      blocked_at_ms, created_at_ms, updated_at_ms)
    SELECT r.id, r.project_id, a.id, 'pending', 0, 0, r.cancel_requested_at_ms, NULL, NULL, NULL, NULL, NULL, NULL, ${p.nowMs}, ${p.nowMs}
    FROM runs AS r
    JOIN attempts AS a ON a.run_id = r.id AND a.status IN ${ACTIVE_ATTEMPT}
    WHERE r.id = ${p.runId} AND r.owner = 'runtime' AND r.status IN ('queued', 'running') AND r.cancel_requested_at_ms IS NOT NULL
    ON CONFLICT (run_id) DO UPDATE SET attempt_id = excluded.attempt_id, version = cancellation_dispatches.version + 1,
      updated_at_ms = excluded.updated_at_ms
    WHERE cancellation_dispatches.status = 'pending' AND cancellation_dispatches.dispatch_count = 0
      AND cancellation_dispatches.attempt_id <> excluded.attempt_id`;
}

/**
 * The due index's partial predicate as each store's index spells it, repeated verbatim in the due
 * query so the planner can prove the index applies. SQLite's is written with OR: it evaluates a
 * 3+ value IN list on every write by building a temporary index of it (docs/decisions/0013).
 */
export const DUE_PREDICATE = {
  postgres: `d.status IN ('pending', 'retry_wait', 'leased')`,
  sqlite: `(d.status = 'pending' OR d.status = 'retry_wait' OR d.status = 'leased')`,
} as const;

const BRANCHES = [
  { status: 'pending', source: 'first_claim' },
  { status: 'retry_wait', source: 'retry_due' },
  { status: 'leased', source: 'lease_expired' },
] as const;

/**
 * The bounded due query: one branch per due status, each an ordered range of the due index
 * (status, due time, run id) limited before the merge, so at most 3 × limit rows reach the sort.
 * Runs and attempts are joined by primary key for the run's state and the owning runner only.
 * `indexHint` is SQLite's `INDEXED BY …` (the statement fails to prepare without the index).
 */
export function duePageSql(
  store: keyof typeof DUE_PREDICATE,
  indexHint: string,
  p: SqlParams<'nowMs' | 'afterAtMs' | 'afterRunId' | 'limit' | 'runnerId'>,
  columns: {
    readonly runId: string;
    readonly attemptId: string;
    readonly cancelRequestedAtMs: string;
    readonly atMs: string;
  },
): string {
  const branch = (status: string, source: string): string => `SELECT * FROM (
      SELECT d.run_id AS ${columns.runId}, d.attempt_id AS ${columns.attemptId}, r.cancel_requested_at_ms AS ${columns.cancelRequestedAtMs},
             '${source}' AS source, ${DUE_AT} AS ${columns.atMs}
      FROM cancellation_dispatches AS d ${indexHint}
      JOIN runs AS r ON r.id = d.run_id
      JOIN attempts AS a ON a.run_id = d.run_id AND a.id = d.attempt_id
      WHERE d.status = '${status}' AND ${DUE_PREDICATE[store]} AND ${DUE_AT} <= ${p.nowMs}
        AND (${DUE_AT}, d.run_id) > (${p.afterAtMs}, ${p.afterRunId})
        AND (${p.runnerId} IS NULL OR a.runner_id = ${p.runnerId})
        AND r.status IN ('queued', 'running') AND r.owner = 'runtime' AND r.cancel_requested_at_ms IS NOT NULL
      ORDER BY ${DUE_AT}, d.run_id
      LIMIT ${p.limit}) AS ${status}_due`;
  return `SELECT ${columns.runId}, ${columns.attemptId}, ${columns.cancelRequestedAtMs}, source, ${columns.atMs} FROM (
    ${BRANCHES.map((b) => branch(b.status, b.source)).join('\n    UNION ALL\n    ')}) AS due
    ORDER BY ${columns.atMs}, ${columns.runId}
    LIMIT ${p.limit}`;
}
