// Appending a RunEvent inside an open PostgreSQL transaction (design/dispatch §2.4 steps 2-3): CAS on the
// run version read under the run lock reserves the next sequence, then the event row is written.
import {
  validateCounter,
  validateEpochMs,
  validateRunRecord,
  type RunEvent,
  type RunEventType,
  type RunRecord,
} from '../../contract/index';
import { storeInvariant } from '../store-errors';
import { RUN_SQL } from './run-statements';
import type { Tx } from './transaction';

/** A run row read by RUN_SQL.lockRun: the record plus the transaction's time. */
export type LockedRun = RunRecord & { readonly nowMs: number };

/** A row of RUN_SQL.lockRun or lockRunsInOrder: the run, validated, with the transaction's time. */
function lockedRunOf({ nowMs, ...run }: Record<string, unknown>): LockedRun {
  return { ...validateRunRecord(run), nowMs: validateEpochMs(nowMs, 'nowMs') };
}

/** Lock 1 of the Run → Attempt → Dispatch order: the run, validated, with the transaction's time. */
export async function lockRun(tx: Tx, runId: string): Promise<LockedRun | undefined> {
  const [row] = await tx.rows(RUN_SQL.lockRun, [runId]);
  return row === undefined ? undefined : lockedRunOf(row);
}

/** Lock 1 for a page: its runs in the database's id order (docs/decisions/0431), by run id. */
export async function lockRunsInOrder(tx: Tx, runIds: readonly string[]): Promise<Map<string, LockedRun>> {
  const runs = new Map<string, LockedRun>();
  for (const row of await tx.rows(RUN_SQL.lockRunsInOrder, [runIds])) {
    const run = lockedRunOf(row);
    runs.set(run.runId, run);
  }
  return runs;
}

/** The run record of a LockedRun, without the transaction's time. */
export function lockedRecord({ nowMs: _nowMs, ...run }: LockedRun): RunRecord {
  return run;
}

export interface EventAppend<P> {
  readonly type: RunEventType;
  readonly eventId: string;
  readonly payload: P;
}

export async function appendRunEvent<P>(
  tx: Tx,
  run: LockedRun,
  append: EventAppend<P>,
): Promise<{ readonly event: RunEvent<P>; readonly run: RunRecord }> {
  const [reserved] = await tx.rows(RUN_SQL.reserveEventSeq, [run.runId, run.version, run.nowMs]);
  // Impossible under the run lock: the version was read under it in this transaction.
  if (reserved === undefined)
    throw storeInvariant('postgres', 'the event append', 'the run version changed under its own row lock');
  const { seq, ...after } = reserved;
  const event = {
    id: append.eventId,
    runId: run.runId,
    seq: validateCounter(seq, 'seq'),
    type: append.type,
    payload: append.payload,
    createdAtMs: run.nowMs,
  };
  await tx.rows(RUN_SQL.insertEvent, [
    run.runId,
    event.seq,
    append.eventId,
    append.type,
    JSON.stringify(append.payload),
    run.nowMs,
  ]);
  return { event, run: validateRunRecord(after) };
}
