// Runs with cancel intent, the fixture most store and dispatch tests start from: created through the
// run store (so every event and version is the product's own), or seeded in bulk by SQL.
import type { Pool } from 'pg';

import type { RunStore } from '../../lib/store/run-store';
import { uniqueId } from './unique-id';

export interface CancelledRun {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
}

/** A process binding for tests whose controller is never called with it. */
export const PLACEHOLDER_BINDING = { pid: 4242, handle: '{"v":1,"pid":4242}' } as const;

export interface CancelledRunOptions {
  readonly runId?: string;
  readonly projectId?: string;
  /** The attempt moves to `running` with this binding (`{}`: running, no process); null: it stays `claimed`. */
  readonly running?: { readonly pid?: number; readonly handle?: string } | null;
  /** The runner that owns the attempt: a due page for that runner sees only its own. */
  readonly runnerId?: string;
}

export async function cancelledRun(runStore: RunStore, options: CancelledRunOptions = {}): Promise<CancelledRun> {
  const runId = options.runId ?? uniqueId('run');
  const attemptId = `${runId}-a1`;
  await runStore.createRun({ runId, projectId: options.projectId ?? 'project-a' });
  await runStore.createAttempt({
    runId,
    attemptId,
    ...(options.runnerId === undefined ? {} : { runnerId: options.runnerId }),
  });
  const running = options.running === undefined ? PLACEHOLDER_BINDING : options.running;
  if (running !== null) await runStore.advanceAttempt({ runId, attemptId, from: 'claimed', to: 'running', ...running });
  const cancelled = await runStore.requestCancellation({ runId, reason: 'user', eventId: uniqueId('evt') });
  if (cancelled.kind !== 'requested') throw new Error(`fixture: cancellation was ${cancelled.kind}`);
  return { runId, attemptId, cancelRequestedAtMs: cancelled.run.cancelRequestedAtMs ?? -1 };
}

/** `count` running, cancelled runs `${prefix}-1`… written directly by the owner (bulk races and HA). */
export async function seedCancelledRuns(
  owner: Pick<Pool, 'query'>,
  prefix: string,
  count: number,
  atMs: number,
  projectId = 'project-a',
): Promise<string[]> {
  await owner.query(
    `INSERT INTO runs (id, project_id, owner, status, version, cancel_requested_at_ms, cancel_reason, next_event_seq, created_at_ms, updated_at_ms)
    SELECT $1 || '-' || g, $4, 'runtime', 'running', 1, $3::bigint, 'user', 2, $3::bigint, $3::bigint FROM generate_series(1, $2::int) AS g`,
    [prefix, count, atMs, projectId],
  );
  await owner.query(
    `INSERT INTO attempts (run_id, id, status, pid, handle, created_at_ms, updated_at_ms)
    SELECT $1 || '-' || g, $1 || '-' || g || '-a1', 'running', 4242, 'h', $3::bigint, $3::bigint FROM generate_series(1, $2::int) AS g`,
    [prefix, count, atMs],
  );
  // The pending dispatch the cancel request writes (docs/decisions/0022).
  await owner.query(
    `INSERT INTO cancellation_dispatches (run_id, project_id, attempt_id, status, version, dispatch_count, next_attempt_at_ms, created_at_ms, updated_at_ms)
    SELECT $1 || '-' || g, $4, $1 || '-' || g || '-a1', 'pending', 0, 0, $3::bigint, $3::bigint, $3::bigint FROM generate_series(1, $2::int) AS g`,
    [prefix, count, atMs, projectId],
  );
  return Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`);
}
