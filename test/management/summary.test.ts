// The summary cross-checks and the assessment mapping (design/dispatch §5.2, gate 16) on counts given directly.
import test from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import type { SummaryCounts } from '../../lib/contract/index';
import { checkedSummary } from '../../lib/management/index';

const counts = (overrides: Partial<SummaryCounts> = {}): SummaryCounts => ({
  permitted: true,
  asOfMs: 1_700_000_000_000,
  total: 0,
  states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 0, blocked: 0 },
  blockingResults: { identity_mismatch: 0, pid_mismatch: 0, unsupported: 0, invalid: 0 },
  overdue: 0,
  runEnded: 0,
  running: 0,
  ...overrides,
});

test('gate 16: the assessment is clear, converging or attention_required exactly by active, running, blocked and overdue counts', (t) => {
  t.is(checkedSummary('p', counts(), 1000).assessment, 'clear');
  t.is(
    checkedSummary(
      'p',
      counts({ total: 2, states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 2, blocked: 0 } }),
      1000,
    ).assessment,
    'clear',
  );
  t.is(
    checkedSummary(
      'p',
      counts({ total: 1, states: { pending: 1, leased: 0, retry_wait: 0, dispatched: 0, blocked: 0 } }),
      1000,
    ).assessment,
    'converging',
  );
  // docs/decisions/0140: a running job keeps the project converging, with or without a dispatch.
  t.is(checkedSummary('p', counts({ running: 1 }), 1000).assessment, 'converging');
  // An unsettled stop of a run that ended is not in flight.
  t.is(
    checkedSummary(
      'p',
      counts({ total: 1, runEnded: 1, states: { pending: 0, leased: 0, retry_wait: 1, dispatched: 0, blocked: 0 } }),
      1000,
    ).assessment,
    'clear',
  );
  t.is(
    checkedSummary(
      'p',
      counts({ running: 3, total: 1, states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 1, blocked: 0 } }),
      1000,
    ).assessment,
    'converging',
  );
  t.is(
    checkedSummary(
      'p',
      counts({
        running: 2,
        total: 1,
        states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 0, blocked: 1 },
        blockingResults: { identity_mismatch: 1, pid_mismatch: 0, unsupported: 0, invalid: 0 },
      }),
      1000,
    ).assessment,
    'attention_required',
  );
  t.is(
    checkedSummary(
      'p',
      counts({ total: 1, states: { pending: 1, leased: 0, retry_wait: 0, dispatched: 0, blocked: 0 }, overdue: 1 }),
      1000,
    ).assessment,
    'attention_required',
  );
  t.is(
    checkedSummary(
      'p',
      counts({
        total: 1,
        states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 0, blocked: 1 },
        blockingResults: { identity_mismatch: 0, pid_mismatch: 1, unsupported: 0, invalid: 0 },
      }),
      1000,
    ).assessment,
    'attention_required',
  );
});

test('gate 16: counts that do not add up are an error naming each broken sum', (t) => {
  const cases: Array<[Partial<SummaryCounts>, RegExp]> = [
    [
      { total: 3, states: { pending: 1, leased: 0, retry_wait: 0, dispatched: 1, blocked: 0 } },
      /five states add up to 2, not the total 3/,
    ],
    [
      { total: 1, states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 0, blocked: 1 } },
      /blocking results add up to 0, not blocked 1/,
    ],
    [
      { total: 1, states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 1, blocked: 0 }, overdue: 1 },
      /overdue 1 and run-ended 0 exceed the 0 active/,
    ],
    [
      { total: 1, states: { pending: 0, leased: 0, retry_wait: 0, dispatched: 1, blocked: 0 }, runEnded: 1 },
      /overdue 0 and run-ended 1 exceed the 0 active/,
    ],
  ];
  for (const [overrides, message] of cases) {
    const error = t.throws(() => checkedSummary('p', counts(overrides), 1000));
    t.is((error as PidfenceError).code, 'ERR_PIDFENCE_SUMMARY_INCONSISTENT');
    t.regex(error?.message ?? '', message);
  }
});
