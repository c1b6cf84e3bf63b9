// The PostgreSQL management store's statements (design/dispatch §5.1-5.4), one named place each, built
// from the shared text in ../management-statements.ts with positional parameters and transaction_timestamp().
import {
  blockedPageSql,
  hasGrantSql,
  insertAuditSql,
  inspectSql,
  rearmSql,
  runAttemptEventsSql,
  runAttemptsSql,
  runDetailSql,
  runEventsSql,
  runPageAllSql,
  runPageByStatusSql,
  summarySql,
} from '../management-statements';
import { DB_NOW_MS } from './clock-statements';

export const MANAGEMENT_SQL = {
  /** The login role of the connection (session_user, not a SET ROLE): the authenticated principal. */
  sessionUser: 'SELECT session_user AS name',
  hasGrant: hasGrantSql({ subject: '$1', projectId: '$2', permission: '$3' }),
  inspect: inspectSql({ runId: '$1' }),
  /** $1 subject, $2 project, $3 overdue bound (ms). The database clock, never the caller's. */
  summary: summarySql({ subject: '$1', projectId: '$2', overdueAfterMs: '$3::bigint', nowMs: DB_NOW_MS }),
  /** $1 project, $2 pinned time, $3/$4 keyset position, $5 limit: the per-project partial index. */
  blockedPage: blockedPageSql('cancellation_dispatches', {
    projectId: '$1',
    asOfMs: '$2::bigint',
    afterAtMs: '$3::bigint',
    afterRunId: '$4::text',
    limit: '$5',
  }),
  /** $1 project, $2/$3 keyset position (the last run shown), $4 limit[, $5 status]: the per-project run indexes. */
  runPageAll: runPageAllSql('runs AS r', {
    projectId: '$1',
    beforeAtMs: '$2::bigint',
    beforeRunId: '$3::text',
    limit: '$4',
  }),
  runPageByStatus: runPageByStatusSql('runs AS r', {
    projectId: '$1',
    beforeAtMs: '$2::bigint',
    beforeRunId: '$3::text',
    limit: '$4',
    status: '$5',
  }),
  /** $1 run[, $2 limit]. */
  runDetail: runDetailSql({ runId: '$1' }),
  runAttempts: runAttemptsSql({ runId: '$1', limit: '$2' }),
  runAttemptEvents: runAttemptEventsSql({ runId: '$1', limit: '$2' }),
  runEvents: runEventsSql({ runId: '$1', limit: '$2' }),
  /** $1 run, $2 expected version, $3 expected result, $4 now (from the run lock). */
  rearm: rearmSql({ runId: '$1', expectedVersion: '$2', expectedResult: '$3', nowMs: '$4::bigint' }),
  insertAudit: insertAuditSql({
    id: '$1',
    runId: '$2',
    projectId: '$3',
    actor: '$4',
    expectedVersion: '$5',
    expectedResult: '$6',
    nowMs: '$7',
  }),

  // ---- owner-only grant writes (the runtime role holds SELECT only) ----
  countGrants: 'SELECT COUNT(*) AS n FROM management_grants',
  insertGrant: `INSERT INTO management_grants (subject, project_id, permission, granted_by, created_at_ms)
    VALUES ($1, $2, $3, $4, ${DB_NOW_MS}) ON CONFLICT DO NOTHING RETURNING 1 AS inserted`,
  deleteGrant:
    'DELETE FROM management_grants WHERE subject = $1 AND project_id = $2 AND permission = $3 RETURNING 1 AS deleted',
  listGrants:
    'SELECT project_id AS "projectId", permission FROM management_grants WHERE subject = $1 ORDER BY project_id, permission',
} as const;
