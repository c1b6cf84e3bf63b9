// The SQL of the SQLite runner store (docs/decisions/0070), each statement in one named place, built
// from the text both dialects share in ../runner-statements.ts with named parameters.
import {
  activeAttemptOwnerSql,
  adoptionCandidatesSql,
  endRunnerSql,
  insertAdoptionEventSql,
  ownedActiveAttemptsSql,
  registerRunnerSql,
  runnerByIdSql,
  transferAttemptSql,
} from '../runner-statements';

export const RUNNER_SQL = {
  registerRunner: registerRunnerSql({
    runnerId: ':runnerId',
    hostId: ':hostId',
    kind: ':kind',
    identity: ':identity',
    nowMs: ':nowMs',
  }),
  endRunner: endRunnerSql({ runnerId: ':runnerId', nowMs: ':nowMs' }),
  activeAttemptOwner: activeAttemptOwnerSql('r.identity', { runId: ':runId' }),
  runnerById: runnerByIdSql('r.identity', { runnerId: ':runnerId' }),
  adoptionCandidates: adoptionCandidatesSql('r.identity', {
    hostId: ':hostId',
    excludeRunnerId: ':excludeRunnerId',
    limit: ':limit',
  }),
  ownedActiveAttempts: ownedActiveAttemptsSql({ runnerId: ':runnerId', runId: ':runId', limit: ':limit' }),
  transferAttempt: transferAttemptSql({
    runId: ':runId',
    attemptId: ':attemptId',
    fromRunnerId: ':fromRunnerId',
    toRunnerId: ':toRunnerId',
    nowMs: ':nowMs',
  }),
  insertAdoptionEvent: insertAdoptionEventSql({
    runId: ':runId',
    attemptId: ':attemptId',
    eventId: ':eventId',
    payload: ':payload',
    nowMs: ':nowMs',
  }),
} as const;
