// Every SQL statement of the SQLite store, each in one named place (graphile-worker style), with
// the fences written into the SQL itself (design/dispatch §2.2 step 6, §2.4).
import type Database from 'better-sqlite3';

import type { DueSource } from '../../contract/index';
import { duePageSql, insertPendingDispatchSql } from '../dispatch-sql';

const RECORD_COLUMNS = `run_id AS runId, project_id AS projectId, attempt_id AS attemptId, status, version,
  dispatch_count AS dispatchCount, next_attempt_at_ms AS nextAttemptAtMs, lease_owner AS leaseOwner,
  lease_token_digest AS leaseTokenDigest, lease_expires_at_ms AS leaseExpiresAtMs, last_result AS lastResult,
  last_dispatched_at_ms AS lastDispatchedAtMs, blocked_at_ms AS blockedAtMs, created_at_ms AS createdAtMs,
  updated_at_ms AS updatedAtMs`;

const RUN_COLUMNS = `id AS runId, project_id AS projectId, owner, status, version,
  cancel_requested_at_ms AS cancelRequestedAtMs, cancel_reason AS cancelReason, next_event_seq AS nextEventSeq,
  created_at_ms AS createdAtMs, updated_at_ms AS updatedAtMs`;

const ATTEMPT_COLUMNS = `id AS attemptId, run_id AS runId, status, pid, handle, deadline_at_ms AS deadlineAtMs,
  receipt_token_digest AS receiptTokenDigest, created_at_ms AS createdAtMs, updated_at_ms AS updatedAtMs`;

export const SQL = {
  // ---- dispatch repository ----
  selectDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = ?`,

  /** Steps 3+6 at once, for a run with no row yet (a row written before the pending one of docs/decisions/0022 existed). */
  insertLeasedDispatch: `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version,
      dispatch_count, next_attempt_at_ms, lease_owner, lease_token_digest, lease_expires_at_ms, last_result,
      last_dispatched_at_ms, blocked_at_ms, created_at_ms, updated_at_ms)
    VALUES (:runId, :projectId, :attemptId, 'leased', 1, 1, NULL, :owner, :digest, :expiresAtMs, NULL, :nowMs, NULL, :nowMs, :nowMs)
    RETURNING ${RECORD_COLUMNS}`,

  /** Step 6: version CAS; the due/expiry rule is repeated here so a stale read can never lease. */
  leaseDispatch: `UPDATE cancellation_dispatches
    SET status = 'leased', version = version + 1, dispatch_count = dispatch_count + 1, next_attempt_at_ms = NULL,
        lease_owner = :owner, lease_token_digest = :digest, lease_expires_at_ms = :expiresAtMs,
        last_dispatched_at_ms = :nowMs, updated_at_ms = :nowMs
    WHERE run_id = :runId AND attempt_id = :attemptId AND version = :version
      AND ((status IN ('pending', 'retry_wait') AND next_attempt_at_ms <= :nowMs)
        OR (status = 'leased' AND lease_expires_at_ms <= :nowMs))
    RETURNING ${RECORD_COLUMNS}`,

  /** design/dispatch §2.4: the whole fence in the WHERE clause; no row back means stale_fence. */
  settleDispatch: `UPDATE cancellation_dispatches
    SET status = :status, version = version + 1, last_result = :result, next_attempt_at_ms = :nextAttemptAtMs,
        blocked_at_ms = :blockedAtMs, lease_owner = NULL, lease_token_digest = NULL, lease_expires_at_ms = NULL,
        updated_at_ms = :nowMs
    WHERE run_id = :runId AND attempt_id = :attemptId AND status = 'leased'
      AND lease_owner = :owner AND lease_token_digest = :digest AND version = :expectedVersion
    RETURNING ${RECORD_COLUMNS}`,

  /** The bounded due query over one index (docs/decisions/0022). */
  duePage: duePageSql(
    'sqlite',
    'INDEXED BY cancellation_dispatches_due',
    { nowMs: ':nowMs', afterAtMs: ':afterAtMs', afterRunId: ':afterRunId', limit: ':limit', runnerId: ':runnerId' },
    { runId: 'runId', attemptId: 'attemptId', cancelRequestedAtMs: 'cancelRequestedAtMs', atMs: 'atMs' },
  ),
  /** design/dispatch §2.2 step 3 at cancel time (and for an attempt created after it). */
  insertPendingDispatch: insertPendingDispatchSql({ runId: ':runId', nowMs: ':nowMs' }),

  // ---- runs, attempts, events (shared by the run store and the result transaction) ----
  selectRun: `SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`,
  insertRun: `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason,
      next_event_seq, created_at_ms, updated_at_ms, name)
    VALUES (:runId, :projectId, :owner, 'queued', 0, NULL, NULL, 1, :nowMs, :nowMs, :name)
    ON CONFLICT DO NOTHING
    RETURNING ${RUN_COLUMNS}`,
  /** Run fields change under the same version CAS that reserves the event sequence. */
  markRunRunning: `UPDATE runs SET status = 'running', updated_at_ms = :nowMs WHERE id = :runId AND status = 'queued'`,
  writeCancelIntent: `UPDATE runs SET cancel_requested_at_ms = :nowMs, cancel_reason = :reason, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version AND cancel_requested_at_ms IS NULL`,
  writeRunTerminal: `UPDATE runs SET status = :status, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version AND status IN ('queued', 'running')`,
  /** design/dispatch §2.4 step 2: CAS on the current run version reserves the next event sequence. */
  reserveEventSeq: `UPDATE runs SET version = version + 1, next_event_seq = next_event_seq + 1, updated_at_ms = :nowMs
    WHERE id = :runId AND version = :version
    RETURNING next_event_seq - 1 AS seq`,
  insertEvent: `INSERT INTO run_events (run_id, seq, id, type, payload, created_at_ms)
    VALUES (:runId, :seq, :eventId, :type, :payload, :nowMs)`,
  listEvents: `SELECT id, run_id AS runId, seq, type, payload, created_at_ms AS createdAtMs
    FROM run_events WHERE run_id = :runId AND seq > :afterSeq ORDER BY seq LIMIT :limit`,

  selectAttempt: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? AND id = ?`,
  /** A claim needs only the attempt's status (design/dispatch §2.2 step 2), not its handle. */
  selectAttemptStatus: `SELECT status FROM attempts WHERE run_id = ? AND id = ?`,
  /** A transaction that appends an event to a run it does not otherwise read needs only the version for the CAS. */
  selectRunVersion: `SELECT version FROM runs WHERE id = ?`,
  selectAttemptById: `SELECT 1 AS found FROM attempts WHERE id = ?`,
  selectActiveAttempt: `SELECT id FROM attempts WHERE run_id = ? AND status IN ('claimed', 'starting', 'running')`,
  insertAttempt: `INSERT INTO attempts (run_id, id, status, pid, handle, deadline_at_ms, receipt_token_digest, runner_id, leftovers, created_at_ms, updated_at_ms)
    VALUES (:runId, :attemptId, 'claimed', NULL, NULL, :deadlineAtMs, :receiptTokenDigest, :runnerId, :leftovers, :nowMs, :nowMs)
    RETURNING ${ATTEMPT_COLUMNS}`,
  /** Exact CAS on status; pid/handle are written once (a second capture would rebind the process). */
  advanceAttempt: `UPDATE attempts
    SET status = :to, pid = COALESCE(:pid, pid), handle = COALESCE(:handle, handle), updated_at_ms = :nowMs
    WHERE run_id = :runId AND id = :attemptId AND status = :from AND (:pid IS NULL OR pid IS NULL)
    RETURNING ${ATTEMPT_COLUMNS}`,
  endAttempt: `UPDATE attempts SET status = :status, updated_at_ms = :nowMs
    WHERE run_id = :runId AND id = :attemptId AND status IN ('claimed', 'starting', 'running')
    RETURNING ${ATTEMPT_COLUMNS}`,
} as const;

export interface DueRow {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
  readonly source: DueSource;
  readonly atMs: number;
}

/** A set of named SQL texts, prepared. */
export type Prepared<S extends Readonly<Record<string, string>>> = { readonly [K in keyof S]: Database.Statement };

export type PreparedStatements = Prepared<typeof SQL>;

/**
 * A set of statements of one connection, each prepared when first used and then kept
 * (better-sqlite3 re-prepares after schema changes): a process that only reads a run prepares only
 * that read, not the store's whole SQL (docs/decisions/0261). The connection's boundary keeps one
 * such set per SQL constant, shared by the five SQLite classes.
 */
export function lazyPreparedSet<S extends Readonly<Record<string, string>>>(
  database: Database.Database,
  sql: S,
): Prepared<S> {
  const prepared = {} as Record<string, Database.Statement>;
  for (const [name, text] of Object.entries(sql)) {
    Object.defineProperty(prepared, name, {
      configurable: true,
      enumerable: true,
      get: () => {
        const statement = database.prepare(text);
        Object.defineProperty(prepared, name, { value: statement, enumerable: true });
        return statement;
      },
    });
  }
  return prepared as Prepared<S>;
}
