// The SQL of the SQLite execution store (design/execution §2-3), each statement in one named place, built
// from the shared text in ../execution-statements.ts with named parameters and INDEXED BY hints; the
// terminal CAS reuses the run store's statements (run-statements.ts) for the run and its event.
import {
  activeAttemptsPageSql,
  attemptByReceiptDigestSql,
  closeJournalSql,
  dueDeadlinesPageSql,
  insertAttemptEventSql,
  insertJournalSql,
  listAttemptEventsSql,
  nextAttemptEventSeqSql,
  nextDueInMsSql,
  openJournalPageSql,
} from '../execution-statements';
import { DUE_PREDICATE } from '../dispatch-statements';
import type { Prepared } from './prepared';

export const EXECUTION_SQL = {
  activeAttemptsPage: activeAttemptsPageSql('attempts AS a INDEXED BY attempts_one_active', {
    afterRunId: ':afterRunId',
    limit: ':limit',
  }),
  ownedAttemptsPage: activeAttemptsPageSql('attempts AS a INDEXED BY attempts_runner_active', {
    afterRunId: ':afterRunId',
    limit: ':limit',
    runnerId: ':runnerId',
  }),
  dueDeadlinesPage: dueDeadlinesPageSql('attempts AS a INDEXED BY attempts_deadline_due', {
    nowMs: ':nowMs',
    afterDueAtMs: ':afterDueAtMs',
    afterRunId: ':afterRunId',
    afterAttemptId: ':afterAttemptId',
    limit: ':limit',
  }),
  ownedDueDeadlinesPage: dueDeadlinesPageSql('attempts AS a INDEXED BY attempts_deadline_due', {
    nowMs: ':nowMs',
    afterDueAtMs: ':afterDueAtMs',
    afterRunId: ':afterRunId',
    afterAttemptId: ':afterAttemptId',
    limit: ':limit',
    runnerId: ':runnerId',
  }),
  nextDueInMs: nextDueInMsSql(
    {
      attempts: 'attempts AS a INDEXED BY attempts_deadline_due',
      dispatches: 'cancellation_dispatches AS d INDEXED BY cancellation_dispatches_due',
    },
    DUE_PREDICATE.sqlite,
    { nowMs: ':nowMs', runnerId: ':runnerId' },
  ),
  attemptByReceiptDigest: attemptByReceiptDigestSql({ digest: '?' }),
  nextAttemptEventSeq: nextAttemptEventSeqSql({ attemptId: '?' }),
  insertAttemptEvent: insertAttemptEventSql({
    runId: ':runId',
    attemptId: ':attemptId',
    seq: ':seq',
    eventId: ':eventId',
    payload: ':payload',
    nowMs: ':nowMs',
  }),
  listAttemptEvents: listAttemptEventsSql({ runId: '?', attemptId: '?' }),
  insertJournal: insertJournalSql({
    attemptId: ':attemptId',
    action: ':action',
    runId: ':runId',
    reason: ':reason',
    nowMs: ':nowMs',
  }),
  openJournalPage: openJournalPageSql('receipt_journal INDEXED BY receipt_journal_open', {
    afterAtMs: ':afterAtMs',
    afterAttemptId: ':afterAttemptId',
    afterAction: ':afterAction',
    limit: ':limit',
  }),
  closeJournal: closeJournalSql({ attemptId: ':attemptId', action: ':action', nowMs: ':nowMs' }),
} as const;

export type ExecutionStatements = Prepared<typeof EXECUTION_SQL>;
