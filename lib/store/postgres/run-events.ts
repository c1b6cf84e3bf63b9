// Appending a RunEvent inside an open PostgreSQL transaction (design/dispatch §2.4 steps 2-3): CAS on the
// run version read under the run lock reserves the next sequence, then the event row is written.
import { PidfenceError } from '../../base/errors';
import type { RunEvent, RunEventType, RunRecord } from '../../contract/index';
import { SQL } from './statements';
import type { Tx } from './transaction';

/** A run row read by SQL.lockRun: the record plus the transaction's time. */
export type LockedRun = RunRecord & { readonly nowMs: number };

export interface EventAppend<P> {
  readonly type: RunEventType;
  readonly eventId: string;
  readonly payload: P;
}

export async function appendRunEvent<P>(tx: Tx, run: LockedRun, append: EventAppend<P>): Promise<{ readonly event: RunEvent<P>; readonly run: RunRecord }> {
  const [reserved] = await tx.rows<RunRecord & { seq: number }>(SQL.reserveEventSeq, [run.runId, run.version, run.nowMs]);
  if (reserved === undefined) {
    // Impossible under the run lock unless something wrote the run outside pidfence.
    throw new PidfenceError('the run changed inside a write transaction; the transaction was rolled back. Retry the operation.', 'ERR_PIDFENCE_RUN_VERSION_CONFLICT');
  }
  await tx.rows(SQL.insertEvent, [run.runId, reserved.seq, append.eventId, append.type, JSON.stringify(append.payload), run.nowMs]);
  const { seq, ...after } = reserved;
  return {
    event: { id: append.eventId, runId: run.runId, seq, type: append.type, payload: append.payload, createdAtMs: run.nowMs },
    run: after,
  };
}
