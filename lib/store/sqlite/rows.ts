// Rows of the shared SQLite statements as contract records (design/architecture §6): every run,
// attempt, dispatch record and event leaves the store through the contract's validator, never a
// type assertion, so a damaged or foreign row fails closed with ERR_PIDFENCE_INVALID_RECORD.
import { isPlainObject } from '../../base/shape';
import {
  ATTEMPT_STATUSES,
  enumField,
  storedRecordValidator,
  validateAttemptRecord,
  validateCounter,
  validateDispatchRecord,
  validateRunEvent,
  validateRunRecord,
  type AttemptRecord,
  type AttemptStatus,
  type CancellationDispatchRecord,
  type DueSource,
  type RunEvent,
  type RunRecord,
} from '../../contract/index';
import { withDecodedPayload } from '../execution-rows';
import { storeInvariant } from '../store-errors';
import type { PreparedStatements } from './prepared';

/** A row of the due page (dispatch-statements.ts duePage). */
export interface DueRow {
  readonly runId: string;
  readonly attemptId: string;
  readonly cancelRequestedAtMs: number;
  readonly source: DueSource;
  readonly atMs: number;
}

/** `validate(row)`, or undefined when the statement found no row. */
export function validatedRow<T>(row: unknown, validate: (value: unknown) => T): T | undefined {
  return row === undefined ? undefined : validate(row);
}

export function selectRun(statements: PreparedStatements, runId: string): RunRecord | undefined {
  return validatedRow(statements.selectRun.get(runId), validateRunRecord);
}

/** A run this write transaction holds: under BEGIN IMMEDIATE it cannot be gone. */
export function selectHeldRun(statements: PreparedStatements, runId: string, operation: string): RunRecord {
  const run = selectRun(statements, runId);
  if (run === undefined) throw storeInvariant('sqlite', operation, 'a run this write transaction holds is gone');
  return run;
}

/** The version of a run this write transaction holds (for the event append's CAS). */
export function selectHeldRunVersion(statements: PreparedStatements, runId: string, operation: string): number {
  const version = counterColumn(statements.selectRunVersion.get(runId), 'version');
  if (version === undefined) throw storeInvariant('sqlite', operation, 'a run this write transaction holds is gone');
  return version;
}

const validateAttemptStatusRow = storedRecordValidator<{ readonly status: AttemptStatus }>(
  'attempt status',
  { status: enumField(ATTEMPT_STATUSES) },
  () => undefined,
);

export function selectAttemptStatus(
  statements: PreparedStatements,
  runId: string,
  attemptId: string,
): AttemptStatus | undefined {
  return validatedRow(statements.selectAttemptStatus.get(runId, attemptId), validateAttemptStatusRow)?.status;
}

export function selectAttempt(
  statements: PreparedStatements,
  runId: string,
  attemptId: string,
): AttemptRecord | undefined {
  return validatedRow(statements.selectAttempt.get(runId, attemptId), validateAttemptRecord);
}

export function selectDispatch(statements: PreparedStatements, runId: string): CancellationDispatchRecord | undefined {
  return validatedRow(statements.selectDispatch.get(runId), validateDispatchRecord);
}

/** A single integer column (`AS n`, `AS seq` ...) of a row, or undefined when there was no row. */
export function counterColumn(row: unknown, column: string): number | undefined {
  if (row === undefined) return undefined;
  return validateCounter(isPlainObject(row) ? row[column] : undefined, column);
}

/** SQLite keeps event payloads as JSON text; the contract's event carries the decoded value. */
export function runEventOf(row: unknown): RunEvent {
  return validateRunEvent(withDecodedPayload(row));
}
