// The SQL of the PostgreSQL runner store (docs/decisions/0070), each statement in one named place, built
// from the text both dialects share in ../runner-statements.ts; the database's clock (clock-statements.ts).
import {
  activeAttemptOwnerSql,
  adoptionCandidatesSql,
  endRunnerSql,
  insertAdoptionEventSql,
  ownedActiveAttemptsSql,
  registerRunnerSql,
  transferAttemptSql,
} from '../runner-statements';
import { DB_NOW_MS } from './clock-statements';

export const RUNNER_SQL = {
  registerRunner: registerRunnerSql({
    runnerId: '$1',
    hostId: '$2',
    kind: '$3',
    identity: '$4::json',
    nowMs: DB_NOW_MS,
  }),
  endRunner: endRunnerSql({ runnerId: '$1', nowMs: DB_NOW_MS }),
  activeAttemptOwner: activeAttemptOwnerSql('r.identity::text', { runId: '$1' }),
  adoptionCandidates: adoptionCandidatesSql('r.identity::text', { hostId: '$1', excludeRunnerId: '$2', limit: '$3' }),
  ownedActiveAttempts: ownedActiveAttemptsSql({ runnerId: '$1', runId: '$2::text', limit: '$3' }),
  /** One row back when the attempt moved. */
  transferAttempt: `${transferAttemptSql({
    runId: '$1',
    attemptId: '$2',
    fromRunnerId: '$3',
    toRunnerId: '$4',
    nowMs: DB_NOW_MS,
  })} RETURNING 1 AS moved`,
  insertAdoptionEvent: insertAdoptionEventSql({
    runId: '$1',
    attemptId: '$2',
    eventId: '$3',
    payload: '$4::json',
    nowMs: DB_NOW_MS,
  }),
} as const;
