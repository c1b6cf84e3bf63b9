// The SQLite management store's statements (design/dispatch §5.1-5.4), one named place each, built from
// the shared text in ../management-statements.ts with SQLite's named parameters and injected clock.
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
import type { Prepared } from './prepared';

const RUN_PAGE = {
  projectId: ':projectId',
  beforeAtMs: ':beforeAtMs',
  beforeRunId: ':beforeRunId',
  limit: ':limit',
} as const;

export const MANAGEMENT_SQL = {
  hasGrant: hasGrantSql({ subject: ':subject', projectId: ':projectId', permission: ':permission' }),
  inspect: inspectSql({ runId: '?' }),
  summary: summarySql({
    subject: ':subject',
    projectId: ':projectId',
    overdueAfterMs: ':overdueAfterMs',
    nowMs: ':nowMs',
  }),
  /** INDEXED BY: the statement fails to prepare rather than scan when the partial index is unusable. */
  blockedPage: blockedPageSql('cancellation_dispatches INDEXED BY cancellation_dispatches_blocked', {
    projectId: ':projectId',
    asOfMs: ':asOfMs',
    afterAtMs: ':afterAtMs',
    afterRunId: ':afterRunId',
    limit: ':limit',
  }),
  /** INDEXED BY, as for the blocked page: a run list never scans another project's runs. */
  runPageAll: runPageAllSql('runs AS r INDEXED BY runs_by_project', RUN_PAGE),
  runPageByStatus: runPageByStatusSql('runs AS r INDEXED BY runs_by_project_status', {
    ...RUN_PAGE,
    status: ':status',
  }),
  runDetail: runDetailSql({ runId: ':runId' }),
  runAttempts: runAttemptsSql({ runId: ':runId', limit: ':limit' }),
  runAttemptEvents: runAttemptEventsSql({ runId: ':runId', limit: ':limit' }),
  runEvents: runEventsSql({ runId: ':runId', limit: ':limit' }),
  rearm: rearmSql({
    runId: ':runId',
    expectedVersion: ':expectedVersion',
    expectedResult: ':expectedResult',
    nowMs: ':nowMs',
  }),
  insertAudit: insertAuditSql({
    id: ':id',
    runId: ':runId',
    projectId: ':projectId',
    actor: ':actor',
    expectedVersion: ':expectedVersion',
    expectedResult: ':expectedResult',
    nowMs: ':nowMs',
  }),

  // ---- owner-only grant writes ----
  countGrants: 'SELECT COUNT(*) AS n FROM management_grants',
  insertGrant: `INSERT INTO management_grants (subject, project_id, permission, granted_by, created_at_ms)
    VALUES (:subject, :projectId, :permission, :grantedBy, :nowMs) ON CONFLICT DO NOTHING`,
  deleteGrant:
    'DELETE FROM management_grants WHERE subject = :subject AND project_id = :projectId AND permission = :permission',
  listGrants:
    'SELECT project_id AS "projectId", permission FROM management_grants WHERE subject = ? ORDER BY project_id, permission',
} as const;

export type ManagementStatements = Prepared<typeof MANAGEMENT_SQL>;
