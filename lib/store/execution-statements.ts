// The SQL text the SQLite and PostgreSQL execution stores share (design/execution §2-3), built with
// each store's placeholders, clock and index hints. The page and row mappers, the attempt event
// payload and the terminal-CAS decision are in execution-rows.ts; stores add only the transaction and
// the driver (docs/decisions/0410).
import type { SqlParams } from './sql-params';

const ACTIVE = `('claimed', 'starting', 'running')`;

/**
 * attempts_one_active is unique on run_id: (run_id) alone is a stable keyset. `from` names
 * `attempts AS a`. With `runnerId`, only that runner's attempts (attempts_runner_active serves it).
 */
export function activeAttemptsPageSql(
  from: string,
  p: SqlParams<'afterRunId' | 'limit'> & { readonly runnerId?: string },
): string {
  return `SELECT a.run_id AS "runId", a.id AS "attemptId", a.status, a.handle IS NOT NULL AS "hasHandle",
      r.cancel_requested_at_ms AS "cancelRequestedAtMs", r.cancel_reason AS "cancelReason"
    FROM ${from}
    JOIN runs AS r ON r.id = a.run_id
    WHERE a.status IN ${ACTIVE} AND a.run_id > ${p.afterRunId}${p.runnerId === undefined ? '' : ` AND a.runner_id = ${p.runnerId}`}
    ORDER BY a.run_id
    LIMIT ${p.limit}`;
}

/** attempts_deadline_due serves the order and the bound; runs with intent already are skipped. */
export function dueDeadlinesPageSql(
  from: string,
  p: SqlParams<'nowMs' | 'afterDueAtMs' | 'afterRunId' | 'afterAttemptId' | 'limit'> & { readonly runnerId?: string },
): string {
  return `SELECT a.run_id AS "runId", a.id AS "attemptId", a.deadline_at_ms AS "dueAtMs"
    FROM ${from}
    JOIN runs AS r ON r.id = a.run_id
    WHERE a.deadline_at_ms IS NOT NULL AND a.status IN ${ACTIVE}
      AND a.deadline_at_ms <= ${p.nowMs}
      AND (a.deadline_at_ms, a.run_id, a.id) > (${p.afterDueAtMs}, ${p.afterRunId}, ${p.afterAttemptId})
      AND r.cancel_requested_at_ms IS NULL AND r.status IN ('queued', 'running')${
        p.runnerId === undefined
          ? ''
          : `
      AND a.runner_id = ${p.runnerId}`
      }
    ORDER BY a.deadline_at_ms, a.run_id, a.id
    LIMIT ${p.limit}`;
}

/**
 * How long until this runner's cycle has work that time alone makes due (docs/decisions/0176): its
 * earliest future deadline without intent, or its earliest future dispatch retry, in milliseconds
 * from the store's clock, NULL when none. What is due already is the running cycle's pages' work
 * (a stuck due row must not turn the timer into a busy loop). Each branch is one ordered range of an existing index
 * (attempts_deadline_due, the dispatch due index) stopped at its first row of this runner.
 */
export function nextDueInMsSql(
  from: { readonly attempts: string; readonly dispatches: string },
  dispatchPredicate: string,
  p: SqlParams<'nowMs' | 'runnerId'>,
): string {
  return `SELECT MIN(due) - ${p.nowMs} AS "dueInMs" FROM (
    SELECT due FROM (SELECT a.deadline_at_ms AS due FROM ${from.attempts}
      JOIN runs AS r ON r.id = a.run_id
      WHERE a.deadline_at_ms IS NOT NULL AND a.status IN ${ACTIVE}
        AND a.deadline_at_ms > ${p.nowMs}
        AND r.cancel_requested_at_ms IS NULL AND r.status IN ('queued', 'running') AND a.runner_id = ${p.runnerId}
      ORDER BY a.deadline_at_ms LIMIT 1) AS deadline
    UNION ALL
    SELECT due FROM (SELECT COALESCE(d.next_attempt_at_ms, d.lease_expires_at_ms) AS due FROM ${from.dispatches}
      JOIN attempts AS da ON da.run_id = d.run_id AND da.id = d.attempt_id
      WHERE ${dispatchPredicate} AND d.status = 'retry_wait' AND COALESCE(d.next_attempt_at_ms, d.lease_expires_at_ms) > ${p.nowMs}
        AND da.runner_id = ${p.runnerId}
      ORDER BY d.status, COALESCE(d.next_attempt_at_ms, d.lease_expires_at_ms) LIMIT 1) AS retry
  ) AS next`;
}

export function attemptByReceiptDigestSql(p: SqlParams<'digest'>): string {
  return `SELECT run_id AS "runId", id AS "attemptId" FROM attempts WHERE receipt_token_digest = ${p.digest}`;
}

export function nextAttemptEventSeqSql(p: SqlParams<'attemptId'>): string {
  return `SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM attempt_events WHERE attempt_id = ${p.attemptId}`;
}

export function insertAttemptEventSql(
  p: SqlParams<'runId' | 'attemptId' | 'seq' | 'eventId' | 'payload' | 'nowMs'>,
): string {
  return `INSERT INTO attempt_events (run_id, attempt_id, seq, id, type, payload, created_at_ms)
    VALUES (${p.runId}, ${p.attemptId}, ${p.seq}, ${p.eventId}, 'attempt.terminal', ${p.payload}, ${p.nowMs})`;
}

export function listAttemptEventsSql(p: SqlParams<'runId' | 'attemptId'>): string {
  return `SELECT id, run_id AS "runId", attempt_id AS "attemptId", seq, type, payload, created_at_ms AS "createdAtMs"
    FROM attempt_events WHERE run_id = ${p.runId} AND attempt_id = ${p.attemptId} ORDER BY seq LIMIT 64`;
}

/** A journal row is written once; a repeated intent keeps the first one (and reopens a closed row). */
export function insertJournalSql(p: SqlParams<'attemptId' | 'action' | 'runId' | 'reason' | 'nowMs'>): string {
  return `INSERT INTO receipt_journal (attempt_id, action, run_id, reason, created_at_ms, done_at_ms)
    VALUES (${p.attemptId}, ${p.action}, ${p.runId}, ${p.reason}, ${p.nowMs}, NULL)
    ON CONFLICT (attempt_id, action) DO UPDATE SET done_at_ms = NULL WHERE receipt_journal.done_at_ms IS NOT NULL`;
}

/** The oldest open journal rows first; `from` is the table reference (SQLite adds INDEXED BY). */
export function openJournalPageSql(
  from: string,
  p: SqlParams<'afterAtMs' | 'afterAttemptId' | 'afterAction' | 'limit'>,
): string {
  return `SELECT run_id AS "runId", attempt_id AS "attemptId", action, created_at_ms AS "createdAtMs"
    FROM ${from}
    WHERE done_at_ms IS NULL AND (created_at_ms, attempt_id, action) > (${p.afterAtMs}, ${p.afterAttemptId}, ${p.afterAction})
    ORDER BY created_at_ms, attempt_id, action
    LIMIT ${p.limit}`;
}

export function closeJournalSql(p: SqlParams<'attemptId' | 'action' | 'nowMs'>): string {
  return `UPDATE receipt_journal SET done_at_ms = ${p.nowMs} WHERE attempt_id = ${p.attemptId} AND action = ${p.action} AND done_at_ms IS NULL`;
}
