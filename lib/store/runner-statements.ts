// The SQL text the SQLite and PostgreSQL runner stores share (docs/decisions/0070), built with each
// store's placeholders and clock. The row mapper is in runner-rows.ts; stores add only the
// transaction (docs/decisions/0410).
import type { SqlParams } from './sql-params';

const ACTIVE = `('claimed', 'starting', 'running')`;

/** `identity` is the expression that yields the identity as text (PostgreSQL stores json). */
function runnerColumns(alias: string, identity: string): string {
  return `${alias}.id AS "runnerId", ${alias}.host_id AS "hostId", ${alias}.kind, ${identity} AS identity,
    ${alias}.started_at_ms AS "startedAtMs", ${alias}.ended_at_ms AS "endedAtMs"`;
}

export function registerRunnerSql(p: SqlParams<'runnerId' | 'hostId' | 'kind' | 'identity' | 'nowMs'>): string {
  return `INSERT INTO runners (id, host_id, kind, identity, started_at_ms, ended_at_ms)
    VALUES (${p.runnerId}, ${p.hostId}, ${p.kind}, ${p.identity}, ${p.nowMs}, NULL)`;
}

export function endRunnerSql(p: SqlParams<'runnerId' | 'nowMs'>): string {
  return `UPDATE runners SET ended_at_ms = ${p.nowMs} WHERE id = ${p.runnerId} AND ended_at_ms IS NULL`;
}

/** One runner by id: a restarted worker proves its earlier process gone by it (docs/decisions/0360). */
export function runnerByIdSql(identity: string, p: SqlParams<'runnerId'>): string {
  return `SELECT ${runnerColumns('r', identity)} FROM runners AS r WHERE r.id = ${p.runnerId}`;
}

/** The run's active attempt (attempts_one_active) and its owner, if it has one. */
export function activeAttemptOwnerSql(identity: string, p: SqlParams<'runId'>): string {
  return `SELECT a.id AS "attemptId", ${runnerColumns('r', identity)}
    FROM attempts AS a
    LEFT JOIN runners AS r ON r.id = a.runner_id
    WHERE a.run_id = ${p.runId} AND a.status IN ${ACTIVE}`;
}

/** Driven by the active attempts (few), not by the runners (one row per foreground run, ever). */
export function adoptionCandidatesSql(identity: string, p: SqlParams<'hostId' | 'excludeRunnerId' | 'limit'>): string {
  return `SELECT ${runnerColumns('r', identity)}
    FROM runners AS r
    WHERE r.host_id = ${p.hostId} AND r.id IN (
      SELECT a.runner_id FROM attempts AS a
      WHERE a.status IN ${ACTIVE} AND a.runner_id IS NOT NULL AND a.runner_id <> ${p.excludeRunnerId})
    ORDER BY r.id
    LIMIT ${p.limit}`;
}

/** `runId` may be NULL: every active attempt of the runner, up to the batch. */
export function ownedActiveAttemptsSql(p: SqlParams<'runnerId' | 'runId' | 'limit'>): string {
  return `SELECT a.run_id AS "runId", a.id AS "attemptId" FROM attempts AS a
    WHERE a.runner_id = ${p.runnerId} AND a.status IN ${ACTIVE} AND (${p.runId} IS NULL OR a.run_id = ${p.runId})
    ORDER BY a.run_id
    LIMIT ${p.limit}`;
}

/** The owner changes only while it is still the runner that was proved gone (a CAS). */
export function transferAttemptSql(
  p: SqlParams<'runId' | 'attemptId' | 'fromRunnerId' | 'toRunnerId' | 'nowMs'>,
): string {
  return `UPDATE attempts SET runner_id = ${p.toRunnerId}, updated_at_ms = ${p.nowMs}
    WHERE run_id = ${p.runId} AND id = ${p.attemptId} AND runner_id = ${p.fromRunnerId} AND status IN ${ACTIVE}`;
}

export function insertAdoptionEventSql(p: SqlParams<'runId' | 'attemptId' | 'eventId' | 'payload' | 'nowMs'>): string {
  return `INSERT INTO attempt_events (run_id, attempt_id, seq, id, type, payload, created_at_ms)
    SELECT ${p.runId}, ${p.attemptId}, COALESCE(MAX(seq), 0) + 1, ${p.eventId}, 'attempt.adopted', ${p.payload}, ${p.nowMs}
    FROM attempt_events WHERE attempt_id = ${p.attemptId}`;
}
