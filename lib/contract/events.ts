// Run event types and their low-sensitivity payloads (design/dispatch §2.4, design/architecture §6): a dispatch event
// carries the attempt id, the dispatch count and the result enum, and nothing else can get in.
import { shapeProblem } from '../base/shape';
import { PidfenceTypeError } from '../base/errors';
import type { DispatchEventType, DispatchResult } from './classification';
import {
  enumField,
  storedRecordValidator,
  validateCounter,
  validateDispatchResult,
  validateEpochMs,
  validateId,
} from './validators';

export type CancelReason = 'user' | 'policy' | 'timeout' | 'shutdown';
export const CANCEL_REASONS: readonly CancelReason[] = ['user', 'policy', 'timeout', 'shutdown'];

/** `run.cancel_dispatch_rearmed`: an operator moved a blocked dispatch back to a due retry (design/dispatch §5.1). */
/**
 * `run.unreachable` / `run.reattached` (cluster only, docs/decisions/0270): the run's worker stopped
 * renewing its lease / answered for it again. Neither ends the run.
 */
export type RunEventType =
  | 'run.cancel_requested'
  | DispatchEventType
  | 'run.cancel_dispatch_rearmed'
  | 'run.terminal'
  | 'run.unreachable'
  | 'run.reattached';

export interface DispatchEventPayload {
  readonly attemptId: string;
  readonly dispatchCount: number;
  readonly result: DispatchResult;
}

/** A RunEvent as stored: `(runId, seq)` is its key; payload is low-sensitivity JSON. */
export interface RunEvent<P = unknown> {
  readonly id: string;
  readonly runId: string;
  readonly seq: number;
  readonly type: RunEventType;
  readonly payload: P;
  readonly createdAtMs: number;
}

export const RUN_EVENT_TYPES: readonly RunEventType[] = [
  'run.cancel_requested',
  'run.cancel_dispatched',
  'run.cancel_dispatch_blocked',
  'run.cancel_dispatch_failed',
  'run.cancel_dispatch_rearmed',
  'run.terminal',
  'run.unreachable',
  'run.reattached',
];

/** A RunEvent read from a store, its payload already decoded from JSON. */
export const validateRunEvent: (value: unknown) => RunEvent = storedRecordValidator<RunEvent>(
  'run event',
  {
    id: validateId,
    runId: validateId,
    seq: validateCounter,
    type: enumField(RUN_EVENT_TYPES),
    payload: (value) => value,
    createdAtMs: validateEpochMs,
  },
  (event, invariant) => {
    invariant(event.seq >= 1, 'event sequences start at 1');
  },
);

const PAYLOAD_KEYS = ['attemptId', 'dispatchCount', 'result'] as const;

/**
 * Builds a dispatch event payload from exactly attemptId, dispatchCount and result. Any other key
 * (a pid, handle, owner, token ...) is refused rather than dropped, so a caller's mistake is loud.
 */
export function buildDispatchEventPayload(input: DispatchEventPayload): DispatchEventPayload {
  const problem = shapeProblem(input, PAYLOAD_KEYS);
  if (problem !== null && problem.kind !== 'missing_key') {
    throw new PidfenceTypeError(
      'a dispatch event payload carries only attemptId, dispatchCount and result; remove the other keys.',
      'ERR_PIDFENCE_INVALID_EVENT_PAYLOAD',
    );
  }
  return {
    attemptId: validateId(input.attemptId, 'attemptId'),
    dispatchCount: validateCounter(input.dispatchCount, 'dispatchCount'),
    result: validateDispatchResult(input.result),
  };
}
