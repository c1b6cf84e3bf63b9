// Bounded exponential backoff (design/dispatch §2.6): min(max, base * 2^(dispatch_count - 1)), exponent
// capped. The caller turns the result into `retryDelayMs`; the repository makes it absolute.
import { PidfenceRangeError } from '../base/errors';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_EXPONENT,
  BACKOFF_MAX_MS,
  COUNTER_MAX,
  RETRY_DELAY_MAX_MS,
  RETRY_DELAY_MIN_MS,
} from './limits';

export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: BACKOFF_BASE_MS, maxMs: BACKOFF_MAX_MS };

function checkDelayBound(value: number, what: string): void {
  if (!Number.isInteger(value) || value < RETRY_DELAY_MIN_MS || value > RETRY_DELAY_MAX_MS) {
    throw new PidfenceRangeError(
      `${what} must be an integer from ${RETRY_DELAY_MIN_MS} to ${RETRY_DELAY_MAX_MS} ms, so every computed delay is a valid retryDelayMs.`,
      'ERR_PIDFENCE_INVALID_BACKOFF',
    );
  }
}

/**
 * The delay before the next dispatch after `dispatchCount` dispatches (1 for the first retry).
 * Always within [RETRY_DELAY_MIN_MS, RETRY_DELAY_MAX_MS], so it can be passed as retryDelayMs.
 */
export function backoffDelayMs(dispatchCount: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  if (!Number.isInteger(dispatchCount) || dispatchCount < 1 || dispatchCount > COUNTER_MAX) {
    throw new PidfenceRangeError(
      "dispatchCount must be a positive integer (the record's dispatch_count).",
      'ERR_PIDFENCE_INVALID_BACKOFF',
    );
  }
  checkDelayBound(policy.baseMs, 'backoff baseMs');
  checkDelayBound(policy.maxMs, 'backoff maxMs');
  if (policy.baseMs > policy.maxMs) {
    throw new PidfenceRangeError('backoff baseMs must not exceed maxMs.', 'ERR_PIDFENCE_INVALID_BACKOFF');
  }
  const exponent = Math.min(dispatchCount - 1, BACKOFF_MAX_EXPONENT);
  return Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
}
