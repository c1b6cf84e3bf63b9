// The run store interface both stores implement (design/architecture §5, design/dispatch §2.2 steps 1-2, design/execution):
// runs, attempts with their durable handle, durable cancel intent and terminal states.
import type {
  AdvanceAttemptCommand,
  AdvanceAttemptOutcome,
  AttemptRecord,
  CreateAttemptCommand,
  CreateAttemptOutcome,
  CreateRunCommand,
  CreateRunOutcome,
  EndAttemptCommand,
  EndAttemptOutcome,
  MarkTerminalCommand,
  MarkTerminalOutcome,
  RequestCancellationCommand,
  RequestCancellationOutcome,
  RunEvent,
  RunRecord,
} from '../contract/index';

export interface RunStore {
  createRun(command: CreateRunCommand): Promise<CreateRunOutcome>;
  /** A new `claimed` attempt, the run's only active one; `timeoutMs` becomes an absolute deadline. */
  createAttempt(command: CreateAttemptCommand): Promise<CreateAttemptOutcome>;
  /** Exact CAS on the attempt's status; pid and durable handle are written once, together. */
  advanceAttempt(command: AdvanceAttemptCommand): Promise<AdvanceAttemptOutcome>;
  /** An active attempt ends (exact CAS on active status); the run stays as it is. */
  endAttempt(command: EndAttemptCommand): Promise<EndAttemptOutcome>;
  /**
   * Durable cancel intent: `cancel_requested_at_ms` (store clock), the reason and a
   * `run.cancel_requested` event in one transaction. An existing intent is kept unchanged.
   */
  requestCancellation(command: RequestCancellationCommand): Promise<RequestCancellationOutcome>;
  /** Run (and optionally its attempt) to a terminal status with a `run.terminal` event. */
  markTerminal(command: MarkTerminalCommand): Promise<MarkTerminalOutcome>;
  getRun(runId: string): Promise<RunRecord | null>;
  getAttempt(runId: string, attemptId: string): Promise<AttemptRecord | null>;
  /** Several attempts in one read (a dispatcher's claimed page, docs/decisions/0023), in the refs' order; at most 64. */
  getAttempts(
    refs: ReadonlyArray<{ readonly runId: string; readonly attemptId: string }>,
  ): Promise<Array<AttemptRecord | null>>;
  /** Events in sequence order, after `afterSeq` (default 0), at most `limit` (≤ 256). */
  listEvents(runId: string, page?: { readonly afterSeq?: number; readonly limit?: number }): Promise<RunEvent[]>;
}
