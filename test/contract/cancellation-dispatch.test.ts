// Unit tests of the pure contract (design/dispatch §2.2-2.6, design/postgres §D2): every validator's rejections,
// backoff bounds, the digest vector, the classification table and the event payload builder.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';
import fc from 'fast-check';

import { PidfenceRangeError, PidfenceTypeError } from '../../lib/base/errors';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  DISPATCH_RESULTS,
  DUE_PAGE_MAX,
  LEASE_DURATION_MAX_MS,
  LEASE_DURATION_MIN_MS,
  RESULT_CLASSIFICATION,
  RETRY_DELAY_MAX_MS,
  RETRY_DELAY_MIN_MS,
  backoffDelayMs,
  buildDispatchEventPayload,
  createLeaseToken,
  leaseTokenDigest,
  validateClaimCommand,
  validateDispatchRecord,
  validateDuePageQuery,
  validateRecordResultCommand,
  type CancellationDispatchRecord,
} from '../../lib/contract/index';

const token = createLeaseToken();
const claim = {
  runId: 'run-1',
  attemptId: 'att-1',
  cancelRequestedAtMs: 1_000,
  owner: 'worker-a',
  token,
  leaseDurationMs: 1_000,
};
const result = {
  runId: 'run-1',
  attemptId: 'att-1',
  owner: 'worker-a',
  token,
  expectedVersion: 1,
  result: 'termination_requested',
  eventId: 'evt-1',
};

function rejects(t: import('ava').ExecutionContext, fn: () => unknown, code: string): void {
  const error = t.throws(fn, { instanceOf: Error });
  t.true(error instanceof PidfenceTypeError || error instanceof PidfenceRangeError, String(error));
  t.is((error as PidfenceTypeError).code, code, error?.message);
  t.false(error?.message.includes(token) ?? true, 'an error message never echoes the token');
}

test('a well-formed claim command passes unchanged', (t) => {
  t.deepEqual(validateClaimCommand({ ...claim }), claim);
});

const claimRejections: ReadonlyArray<[string, unknown, string]> = [
  ['not an object', 'run-1', 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an array', [], 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['a class instance', new (class Claim {})(), 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an unknown key (now)', { ...claim, nowMs: 5 }, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an absolute expiry', { ...claim, leaseExpiresAtMs: 5 }, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['a missing owner', { ...claim, owner: undefined }, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an empty run id', { ...claim, runId: '' }, 'ERR_PIDFENCE_INVALID_ID'],
  ['a run id with a space', { ...claim, runId: 'run 1' }, 'ERR_PIDFENCE_INVALID_ID'],
  ['a run id of 129 characters', { ...claim, runId: 'r'.repeat(129) }, 'ERR_PIDFENCE_INVALID_ID'],
  ['a numeric attempt id', { ...claim, attemptId: 7 }, 'ERR_PIDFENCE_INVALID_ID'],
  ['a float cancel time', { ...claim, cancelRequestedAtMs: 1.5 }, 'ERR_PIDFENCE_INVALID_TIMESTAMP'],
  ['a negative cancel time', { ...claim, cancelRequestedAtMs: -1 }, 'ERR_PIDFENCE_INVALID_TIMESTAMP'],
  ['a string cancel time', { ...claim, cancelRequestedAtMs: '1000' }, 'ERR_PIDFENCE_INVALID_TIMESTAMP'],
  ['an owner with a newline', { ...claim, owner: 'a\nb' }, 'ERR_PIDFENCE_INVALID_OWNER'],
  ['an owner of 129 characters', { ...claim, owner: 'o'.repeat(129) }, 'ERR_PIDFENCE_INVALID_OWNER'],
  ['a short token', { ...claim, token: token.slice(1) }, 'ERR_PIDFENCE_INVALID_TOKEN'],
  ['a token with padding', { ...claim, token: `${token.slice(1)}=` }, 'ERR_PIDFENCE_INVALID_TOKEN'],
  [
    'a lease below the minimum',
    { ...claim, leaseDurationMs: LEASE_DURATION_MIN_MS - 1 },
    'ERR_PIDFENCE_INVALID_LEASE_DURATION',
  ],
  [
    'a lease above the maximum',
    { ...claim, leaseDurationMs: LEASE_DURATION_MAX_MS + 1 },
    'ERR_PIDFENCE_INVALID_LEASE_DURATION',
  ],
  ['an infinite lease', { ...claim, leaseDurationMs: Infinity }, 'ERR_PIDFENCE_INVALID_LEASE_DURATION'],
  ['a NaN lease', { ...claim, leaseDurationMs: Number.NaN }, 'ERR_PIDFENCE_INVALID_LEASE_DURATION'],
];

for (const [what, input, code] of claimRejections) {
  test(`claim validator rejects ${what}`, (t) => rejects(t, () => validateClaimCommand(input), code));
}

test('a well-formed result command passes; retryable results keep their delay', (t) => {
  t.deepEqual(validateRecordResultCommand({ ...result }), result);
  const retry = { ...result, result: 'dispatch_error', retryDelayMs: 100 };
  t.deepEqual(validateRecordResultCommand(retry), retry);
});

const resultRejections: ReadonlyArray<[string, unknown, string]> = [
  ['null', null, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an unknown key (nextAttemptAtMs)', { ...result, nextAttemptAtMs: 5 }, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['a missing event id', { ...result, eventId: undefined }, 'ERR_PIDFENCE_INVALID_COMMAND'],
  ['an unknown result', { ...result, result: 'killed' }, 'ERR_PIDFENCE_INVALID_RESULT'],
  ['version 0', { ...result, expectedVersion: 0 }, 'ERR_PIDFENCE_INVALID_VERSION'],
  ['a fractional version', { ...result, expectedVersion: 1.5 }, 'ERR_PIDFENCE_INVALID_VERSION'],
  ['a bigint version', { ...result, expectedVersion: 1n }, 'ERR_PIDFENCE_INVALID_VERSION'],
  ['a bad token', { ...result, token: 'x' }, 'ERR_PIDFENCE_INVALID_TOKEN'],
  ['a bad owner', { ...result, owner: '' }, 'ERR_PIDFENCE_INVALID_OWNER'],
  ['a bad event id', { ...result, eventId: '-x' }, 'ERR_PIDFENCE_INVALID_ID'],
  ['a delay on a final result', { ...result, retryDelayMs: 100 }, 'ERR_PIDFENCE_INVALID_RETRY_DELAY'],
  ['a retryable result without delay', { ...result, result: 'handle_missing' }, 'ERR_PIDFENCE_INVALID_RETRY_DELAY'],
  [
    'a delay below the minimum',
    { ...result, result: 'handle_missing', retryDelayMs: RETRY_DELAY_MIN_MS - 1 },
    'ERR_PIDFENCE_INVALID_RETRY_DELAY',
  ],
  [
    'a delay above the maximum',
    { ...result, result: 'handle_missing', retryDelayMs: RETRY_DELAY_MAX_MS + 1 },
    'ERR_PIDFENCE_INVALID_RETRY_DELAY',
  ],
];

for (const [what, input, code] of resultRejections) {
  test(`result validator rejects ${what}`, (t) => rejects(t, () => validateRecordResultCommand(input), code));
}

test('gate 9: the due page defaults to 32 and refuses more than 64 items or a malformed cursor', (t) => {
  t.deepEqual(validateDuePageQuery(), { limit: 32, after: null, runnerId: null });
  t.deepEqual(validateDuePageQuery({ limit: DUE_PAGE_MAX, after: { atMs: 5, runId: 'r' } }), {
    limit: 64,
    after: { atMs: 5, runId: 'r' },
    runnerId: null,
  });
  t.is(validateDuePageQuery({ runnerId: 'rnr-1' }).runnerId, 'rnr-1', 'a runner may ask for its own attempts only');
  rejects(t, () => validateDuePageQuery({ runnerId: 'not an id' }), 'ERR_PIDFENCE_INVALID_ID');
  rejects(t, () => validateDuePageQuery({ limit: DUE_PAGE_MAX + 1 }), 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  rejects(t, () => validateDuePageQuery({ limit: 0 }), 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  rejects(t, () => validateDuePageQuery({ after: { atMs: 5 } }), 'ERR_PIDFENCE_INVALID_COMMAND');
  rejects(t, () => validateDuePageQuery({ after: { atMs: -5, runId: 'r' } }), 'ERR_PIDFENCE_INVALID_TIMESTAMP');
  rejects(t, () => validateDuePageQuery({ nowMs: 1 }), 'ERR_PIDFENCE_INVALID_COMMAND');
});

test('gate 9: backoff doubles from the base and never exceeds the cap, even for huge counts', (t) => {
  t.is(backoffDelayMs(1), BACKOFF_BASE_MS);
  t.is(backoffDelayMs(2), 2 * BACKOFF_BASE_MS);
  t.is(backoffDelayMs(3), 4 * BACKOFF_BASE_MS);
  t.is(backoffDelayMs(1_000_000), BACKOFF_MAX_MS);
  t.is(backoffDelayMs(Number.MAX_SAFE_INTEGER), BACKOFF_MAX_MS);
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      fc.integer({ min: RETRY_DELAY_MIN_MS, max: 10_000 }),
      fc.integer({ min: 10_000, max: RETRY_DELAY_MAX_MS }),
      (count, baseMs, maxMs) => {
        const delay = backoffDelayMs(count, { baseMs, maxMs });
        const next = backoffDelayMs(Math.min(count + 1, Number.MAX_SAFE_INTEGER), { baseMs, maxMs });
        return (
          Number.isInteger(delay) &&
          delay >= baseMs &&
          delay <= maxMs &&
          next >= delay &&
          delay >= RETRY_DELAY_MIN_MS &&
          delay <= RETRY_DELAY_MAX_MS
        );
      },
    ),
  );
  t.throws(() => backoffDelayMs(0), { instanceOf: PidfenceRangeError });
  t.throws(() => backoffDelayMs(1, { baseMs: 5, maxMs: 1_000 }), { instanceOf: PidfenceRangeError });
  t.throws(() => backoffDelayMs(1, { baseMs: 2_000, maxMs: 1_000 }), { instanceOf: PidfenceRangeError });
});

test('the token digest is SHA-256 over the domain prefix and the token (fixed vector)', (t) => {
  const fixed = 'A'.repeat(43);
  // Computed independently: python3 hashlib.sha256(b'pidfence.cancellation-dispatch-lease.v1\x00' + b'A'*43)
  t.is(leaseTokenDigest(fixed), 'f42aa42eb20cf02e452b9aa9bbd097998a15bfea0222443ff99a30556fcce158');
  t.not(
    leaseTokenDigest(fixed),
    '0f007385b6f9d4b7eeb2748605afe1a984a0a3bfa3f014d09e2a784ce9e5cd1a',
    'the undomained digest differs',
  );
});

test('tokens come from the CSPRNG: 43 base64url characters, never repeated', (t) => {
  const tokens = new Set(Array.from({ length: 1_000 }, () => createLeaseToken()));
  t.is(tokens.size, 1_000);
  for (const value of tokens) t.regex(value, /^[A-Za-z0-9_-]{43}$/);
});

test('the classification table is design/dispatch §2.4 exactly and covers every result', (t) => {
  const byStatus = (status: string) => DISPATCH_RESULTS.filter((r) => RESULT_CLASSIFICATION[r].status === status);
  t.deepEqual(byStatus('dispatched'), ['termination_requested', 'already_exited']);
  t.deepEqual(byStatus('blocked'), ['identity_mismatch', 'pid_mismatch', 'unsupported', 'invalid']);
  t.deepEqual(byStatus('retry_wait'), ['controller_missing', 'handle_missing', 'dispatch_error']);
  for (const r of DISPATCH_RESULTS) {
    const cls = RESULT_CLASSIFICATION[r];
    t.is(cls.retryable, cls.status === 'retry_wait');
    const expected = {
      dispatched: 'run.cancel_dispatched',
      blocked: 'run.cancel_dispatch_blocked',
      retry_wait: 'run.cancel_dispatch_failed',
    } as const;
    t.is(cls.eventType, expected[cls.status]);
  }
  t.true(Object.isFrozen(RESULT_CLASSIFICATION));
});

test('gate 10: the event payload builder emits only attempt id, dispatch count and result', (t) => {
  const payload = buildDispatchEventPayload({ attemptId: 'att-1', dispatchCount: 2, result: 'already_exited' });
  t.deepEqual(Object.keys(payload).sort(), ['attemptId', 'dispatchCount', 'result']);
  const smuggled = {
    attemptId: 'att-1',
    dispatchCount: 2,
    result: 'already_exited',
    pid: 1234,
    handle: '{"v":1}',
  } as never;
  rejects(t, () => buildDispatchEventPayload(smuggled), 'ERR_PIDFENCE_INVALID_EVENT_PAYLOAD');
  rejects(
    t,
    () => buildDispatchEventPayload({ attemptId: 'att-1', dispatchCount: -1, result: 'already_exited' }),
    'ERR_PIDFENCE_INVALID_COUNTER',
  );
  rejects(
    t,
    () => buildDispatchEventPayload({ attemptId: 'att-1', dispatchCount: 1, result: 'oops' as never }),
    'ERR_PIDFENCE_INVALID_RESULT',
  );
});

const leased: CancellationDispatchRecord = {
  runId: 'run-1',
  projectId: 'p',
  attemptId: 'att-1',
  status: 'leased',
  version: 1,
  dispatchCount: 1,
  nextAttemptAtMs: null,
  leaseOwner: 'worker-a',
  leaseTokenDigest: leaseTokenDigest(token),
  leaseExpiresAtMs: 2_000,
  lastResult: null,
  lastDispatchedAtMs: 1_000,
  blockedAtMs: null,
  createdAtMs: 1_000,
  updatedAtMs: 1_000,
};

test('the record validator accepts each legal state shape', (t) => {
  t.deepEqual(validateDispatchRecord({ ...leased }), leased);
  const settled = {
    ...leased,
    version: 2,
    leaseOwner: null,
    leaseTokenDigest: null,
    leaseExpiresAtMs: null,
    lastResult: 'dispatch_error',
  };
  t.is(validateDispatchRecord({ ...settled, status: 'retry_wait', nextAttemptAtMs: 3_000 }).status, 'retry_wait');
  t.is(validateDispatchRecord({ ...settled, status: 'dispatched', lastResult: 'already_exited' }).status, 'dispatched');
  t.is(
    validateDispatchRecord({ ...settled, status: 'blocked', lastResult: 'pid_mismatch', blockedAtMs: 3_000 }).status,
    'blocked',
  );
  // A rearmed blocked record waits in retry_wait with its blocking result kept.
  t.is(
    validateDispatchRecord({
      ...settled,
      status: 'retry_wait',
      lastResult: 'identity_mismatch',
      nextAttemptAtMs: 3_000,
    }).status,
    'retry_wait',
  );
});

const recordRejections: ReadonlyArray<[string, unknown]> = [
  ['a leased record without a digest', { ...leased, leaseTokenDigest: null }],
  ['a leased record with a due time', { ...leased, nextAttemptAtMs: 5 }],
  [
    'a retry_wait record without a due time',
    {
      ...leased,
      status: 'retry_wait',
      leaseOwner: null,
      leaseTokenDigest: null,
      leaseExpiresAtMs: null,
      lastResult: 'dispatch_error',
    },
  ],
  ['a dispatched record that keeps its lease', { ...leased, status: 'dispatched', lastResult: 'already_exited' }],
  [
    'a blocked record without blocked_at_ms',
    {
      ...leased,
      status: 'blocked',
      leaseOwner: null,
      leaseTokenDigest: null,
      leaseExpiresAtMs: null,
      lastResult: 'invalid',
    },
  ],
  ['a dispatch count above the version', { ...leased, dispatchCount: 2 }],
  [
    'a dispatched record with a blocking result',
    {
      ...leased,
      status: 'dispatched',
      leaseOwner: null,
      leaseTokenDigest: null,
      leaseExpiresAtMs: null,
      lastResult: 'invalid',
    },
  ],
  ['a missing field', (({ blockedAtMs: _omit, ...rest }) => rest)(leased)],
];

for (const [what, input] of recordRejections) {
  test(`the record validator rejects ${what}`, (t) =>
    rejects(t, () => validateDispatchRecord(input), 'ERR_PIDFENCE_INVALID_RECORD'));
}

test('the contract is pure: its sources import only node:crypto, the base layer (errors, limits, shape) and each other', (t) => {
  const dir = path.resolve(__dirname, '../../../lib/contract');
  const sources = readdirSync(dir).filter((name) => name.endsWith('.ts'));
  t.true(sources.length >= 8);
  for (const name of sources) {
    for (const match of readFileSync(path.join(dir, name), 'utf8').matchAll(/from '([^']+)'/g)) {
      t.regex(
        match[1] ?? '',
        /^(node:crypto|\.\.\/base\/(errors|limits|shape)|\.\/[a-z-]+)$/,
        `${name} imports ${match[1]}`,
      );
    }
  }
});
