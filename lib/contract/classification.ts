// The result-classification table of design/dispatch §2.4, as data: which dispatch status and which
// RunEvent each controller/dispatch result leads to, and whether it may be retried automatically.

export const DISPATCH_STATUSES = ['pending', 'leased', 'retry_wait', 'dispatched', 'blocked'] as const;
export type DispatchStatus = (typeof DISPATCH_STATUSES)[number];

export const DISPATCH_RESULTS = [
  'termination_requested',
  'already_exited',
  'identity_mismatch',
  'pid_mismatch',
  'unsupported',
  'invalid',
  'controller_missing',
  'handle_missing',
  'dispatch_error',
] as const;
export type DispatchResult = (typeof DISPATCH_RESULTS)[number];

export type DispatchEventType = 'run.cancel_dispatched' | 'run.cancel_dispatch_blocked' | 'run.cancel_dispatch_failed';

/** The three classes of design/dispatch §2.4; the settled status of each. */
export type SettledStatus = 'dispatched' | 'blocked' | 'retry_wait';

export interface ResultClass {
  readonly status: SettledStatus;
  readonly eventType: DispatchEventType;
  /** Only retry_wait results carry (and require) a bounded retryDelayMs. */
  readonly retryable: boolean;
}

const DISPATCHED: ResultClass = { status: 'dispatched', eventType: 'run.cancel_dispatched', retryable: false };
const BLOCKED: ResultClass = { status: 'blocked', eventType: 'run.cancel_dispatch_blocked', retryable: false };
const RETRY: ResultClass = { status: 'retry_wait', eventType: 'run.cancel_dispatch_failed', retryable: true };

export const RESULT_CLASSIFICATION: Readonly<Record<DispatchResult, ResultClass>> = Object.freeze({
  // A signal was delivered or the process is gone: wait for completion to converge the run.
  termination_requested: DISPATCHED,
  already_exited: DISPATCHED,
  // Identity doubt: never retry automatically, wait for diagnosis or an explicit rearm.
  identity_mismatch: BLOCKED,
  pid_mismatch: BLOCKED,
  unsupported: BLOCKED,
  invalid: BLOCKED,
  // Transient: retry with persisted, bounded backoff.
  controller_missing: RETRY,
  handle_missing: RETRY,
  dispatch_error: RETRY,
});

export function classifyResult(result: DispatchResult): ResultClass {
  return RESULT_CLASSIFICATION[result];
}

export function isDispatchResult(value: unknown): value is DispatchResult {
  return typeof value === 'string' && (DISPATCH_RESULTS as readonly string[]).includes(value);
}
