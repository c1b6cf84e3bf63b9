// Appending a RunEvent inside an open SQLite transaction (design/dispatch §2.4 steps 2-3): CAS on the run
// version reserves the next sequence, then the low-sensitivity event row is written.
import type { RunEvent, RunEventType } from '../../contract/index';
import { storeInvariant } from '../store-errors';
import { counterColumn } from './rows';
import type { PreparedStatements } from './prepared';

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
  const seq = counterColumn(
    statements.reserveEventSeq.get({ runId: append.runId, version: append.version, nowMs: append.nowMs }),
    'seq',
  );
  // Impossible under BEGIN IMMEDIATE: the version was read in this transaction.
  if (seq === undefined)
    throw storeInvariant('sqlite', 'the event append', 'the run version changed inside its own write transaction');
  statements.insertEvent.run({
    runId: append.runId,
    seq,
    eventId: append.eventId,
    type: append.type,
    payload: JSON.stringify(append.payload),
    nowMs: append.nowMs,
  });
  return {
    id: append.eventId,
    runId: append.runId,
    seq,
    type: append.type,
    payload: append.payload,
    createdAtMs: append.nowMs,
  };
}
