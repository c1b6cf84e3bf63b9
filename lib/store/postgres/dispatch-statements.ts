// The PostgreSQL dispatch repository's statements, each in one named place, with the fences in the SQL
// itself (design/dispatch §2.2 step 6, §2.4) and transaction_timestamp() as the only clock
// (design/postgres §D3). Row locks are always taken Run → Attempt → Dispatch (design/postgres §D7-D8):
// the run's lock is in run-statements.ts.
import { duePageSql } from '../dispatch-statements';
import { DB_NOW_MS } from './clock-statements';

const RECORD_COLUMNS = `run_id AS "runId", project_id AS "projectId", attempt_id AS "attemptId", status, version,
  dispatch_count AS "dispatchCount", next_attempt_at_ms AS "nextAttemptAtMs", lease_owner AS "leaseOwner",
  lease_token_digest AS "leaseTokenDigest", lease_expires_at_ms AS "leaseExpiresAtMs", last_result AS "lastResult",
  last_dispatched_at_ms AS "lastDispatchedAtMs", blocked_at_ms AS "blockedAtMs", created_at_ms AS "createdAtMs",
  updated_at_ms AS "updatedAtMs"`;

const DUE_PAGE = duePageSql(
  'postgres',
  '',
  { nowMs: DB_NOW_MS, afterAtMs: '$1::bigint', afterRunId: '$2::text', limit: '$3', runnerId: '$4::text' },
  { runId: '"runId"', attemptId: '"attemptId"', cancelRequestedAtMs: '"cancelRequestedAtMs"', atMs: '"atMs"' },
);

export const DISPATCH_SQL = {
  /** Lock 3 of 3 (the attempt's lock, 2 of 3, is in each store's own statement): the dispatch record. */
  lockDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = $1 FOR NO KEY UPDATE`,

  // ---- dispatch repository ----
  /** One round trip each (docs/decisions/0021, 0231): the whole transaction runs in the server. */
  claimCall: 'SELECT pidfence_claim($1, $2, $3, $4, $5, $6) AS outcome',
  /** docs/decisions/0024: the arrays come sorted by run id, one element per item. */
  claimPageCall:
    'SELECT "runId", outcome FROM pidfence_claim_page($1::text[], $2::text[], $3::bigint[], $4, $5::text[], $6)',
  recordResultCall: 'SELECT pidfence_record_result($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS outcome',
  /** docs/decisions/0024: the arrays come sorted by run id, one element per command. */
  recordResultsCall: `SELECT "runId", outcome FROM pidfence_record_results($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
    $6::text[], $7::text[], $8::bigint[], $9::boolean[], $10::text[], $11::text[])`,
  selectDispatch: `SELECT ${RECORD_COLUMNS} FROM cancellation_dispatches WHERE run_id = $1`,

  /**
   * The bounded due query over one index (docs/decisions/0022).
   * $1 afterAtMs, $2 afterRunId, $3 limit, $4 runnerId (NULL: every runner's).
   */
  duePage: DUE_PAGE,
  /**
   * The due page claimed in the statement that reads it (docs/decisions/0025): the due query's
   * parameters, then $5 owner, $6 one digest per position, $7 lease duration. A due item without an
   * outcome was passed over.
   */
  claimDuePageCall: `WITH due AS MATERIALIZED (${DUE_PAGE}),
    claimed AS MATERIALIZED (SELECT * FROM pidfence_claim_due_page(
      ARRAY(SELECT "runId" FROM due ORDER BY "atMs", "runId"), ARRAY(SELECT "attemptId" FROM due ORDER BY "atMs", "runId"),
      ARRAY(SELECT "cancelRequestedAtMs" FROM due ORDER BY "atMs", "runId"), $5, $6::text[], $7))
    SELECT due.*, claimed.outcome FROM due LEFT JOIN claimed USING ("runId") ORDER BY due."atMs", due."runId"`,
  /**
   * design/dispatch §2.2 step 3 for an attempt created after the cancel: migration 0018's set rule with
   * one run, the rule's one PostgreSQL home (docs/decisions/0340). $1 runId, $2 nowMs.
   */
  insertPendingDispatch: 'SELECT pidfence_insert_pending_dispatches(ARRAY[$1::text], $2::bigint)',
} as const;
