// Rows read back from a store become runs, attempts, events and dispatch records only through the
// contract's validators (design/architecture §6): every legal shape passes unchanged, and anything a
// damaged or foreign row can hold is ERR_PIDFENCE_INVALID_RECORD, never a caller's input code.
import test from 'ava';

import { PidfenceRangeError, PidfenceTypeError } from '../../lib/base/errors';
import {
  validateAttemptRecord,
  validateDispatchRecord,
  validateRunEvent,
  validateRunRecord,
  type AttemptRecord,
  type RunEvent,
  type RunRecord,
} from '../../lib/contract/index';

const run: RunRecord = {
  runId: 'run-1',
  projectId: 'project-a',
  owner: 'runtime',
  status: 'running',
  version: 2,
  cancelRequestedAtMs: 1_500,
  cancelReason: 'user',
  nextEventSeq: 2,
  createdAtMs: 1_000,
  updatedAtMs: 1_500,
};
const attempt: AttemptRecord = {
  attemptId: 'run-1-a1',
  runId: 'run-1',
  status: 'running',
  pid: 4242,
  handle: '{"v":1,"pid":4242}',
  deadlineAtMs: null,
  receiptTokenDigest: 'ab'.repeat(32),
  createdAtMs: 1_000,
  updatedAtMs: 1_100,
};
const event: RunEvent = {
  id: 'evt-1',
  runId: 'run-1',
  seq: 1,
  type: 'run.cancel_requested',
  payload: { reason: 'user' },
  createdAtMs: 1_500,
};

function invalidRecord(t: import('ava').ExecutionContext, fn: () => unknown, what: string): void {
  const error = t.throws(fn, { instanceOf: Error }, what);
  t.true(error instanceof PidfenceTypeError || error instanceof PidfenceRangeError, `${what}: ${String(error)}`);
  t.is((error as PidfenceRangeError).code, 'ERR_PIDFENCE_INVALID_RECORD', `${what}: ${error?.message}`);
}

test('legal run, attempt and event rows pass unchanged', (t) => {
  t.deepEqual(validateRunRecord({ ...run }), run);
  t.deepEqual(
    validateRunRecord({
      ...run,
      status: 'queued',
      version: 0,
      cancelRequestedAtMs: null,
      cancelReason: null,
      nextEventSeq: 1,
    }).status,
    'queued',
  );
  t.deepEqual(validateAttemptRecord({ ...attempt }), attempt);
  t.deepEqual(
    validateAttemptRecord({
      ...attempt,
      status: 'claimed',
      pid: null,
      handle: null,
      receiptTokenDigest: null,
      deadlineAtMs: 9_000,
    }).pid,
    null,
  );
  t.deepEqual(validateRunEvent({ ...event }), event);
});

const rejections: ReadonlyArray<[string, () => unknown]> = [
  ['a run with a cancel time but no reason', () => validateRunRecord({ ...run, cancelReason: null })],
  ['a run with an unknown status', () => validateRunRecord({ ...run, status: 'paused' })],
  ['a run owned by nobody known', () => validateRunRecord({ ...run, owner: 'cron' })],
  ['a run with a malformed project id', () => validateRunRecord({ ...run, projectId: 'project a' })],
  ['a run with a fractional version', () => validateRunRecord({ ...run, version: 1.5 })],
  ['a run whose event sequence starts at 0', () => validateRunRecord({ ...run, nextEventSeq: 0 })],
  ['a run row missing a column', () => validateRunRecord((({ updatedAtMs: _omit, ...rest }) => rest)(run))],
  ['a run row with an extra column', () => validateRunRecord({ ...run, runnerId: 'rnr-1' })],
  ['a run that is not an object', () => validateRunRecord(undefined)],
  ['an attempt with a pid but no handle', () => validateAttemptRecord({ ...attempt, handle: null })],
  ['an attempt with a pid beyond PID_MAX', () => validateAttemptRecord({ ...attempt, pid: 5_000_000 })],
  ['an attempt with an empty handle', () => validateAttemptRecord({ ...attempt, handle: '' })],
  [
    'an attempt with an uppercase digest',
    () => validateAttemptRecord({ ...attempt, receiptTokenDigest: 'AB'.repeat(32) }),
  ],
  ['an attempt with an unknown status', () => validateAttemptRecord({ ...attempt, status: 'lost' })],
  ['an event with an unknown type', () => validateRunEvent({ ...event, type: 'run.paused' })],
  ['an event with sequence 0', () => validateRunEvent({ ...event, seq: 0 })],
  [
    'a dispatch record with a malformed run id',
    () =>
      validateDispatchRecord({
        runId: 'run 1',
        projectId: 'p',
        attemptId: 'att-1',
        status: 'pending',
        version: 0,
        dispatchCount: 0,
        nextAttemptAtMs: 5,
        leaseOwner: null,
        leaseTokenDigest: null,
        leaseExpiresAtMs: null,
        lastResult: null,
        lastDispatchedAtMs: null,
        blockedAtMs: null,
        createdAtMs: 1,
        updatedAtMs: 1,
      }),
  ],
];

for (const [what, fn] of rejections) {
  test(`the stored-row validators reject ${what}`, (t) => invalidRecord(t, fn, what));
}
