// Appending a RunEvent inside an open SQLite transaction (design/dispatch §2.4 steps 2-3): CAS on the run
// version reserves the next sequence, then the low-sensitivity event row is written.
import { PidfenceError } from '../../base/errors';
import type { RunEvent, RunEventType } from '../../contract/index';
import type { PreparedStatements } from './statements';

export interface EventAppend<P> {
  readonly runId: string;
  /** The run version read at the start of this transaction. */
  readonly version: number;
  readonly type: RunEventType;
  readonly eventId: string;
  readonly payload: P;
  readonly nowMs: number;
}

export function appendRunEvent<P>(statements: PreparedStatements, append: EventAppend<P>): RunEvent<P> {
  const reserved = statements.reserveEventSeq.get({ runId: append.runId, version: append.version, nowMs: append.nowMs }) as { seq: number } | undefined;
  if (reserved === undefined) {
    // Impossible under BEGIN IMMEDIATE unless something wrote the run outside pidfence.
    throw new PidfenceError('the run changed inside a write transaction; the transaction was rolled back. Retry the operation.', 'ERR_PIDFENCE_RUN_VERSION_CONFLICT');
  }
  statements.insertEvent.run({
    runId: append.runId,
    seq: reserved.seq,
    eventId: append.eventId,
    type: append.type,
    payload: JSON.stringify(append.payload),
    nowMs: append.nowMs,
  });
  return { id: append.eventId, runId: append.runId, seq: reserved.seq, type: append.type, payload: append.payload, createdAtMs: append.nowMs };
}
