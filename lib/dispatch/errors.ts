// Typed errors of the dispatch layer (design/dispatch §2.5-2.6): stable codes, messages that say what to do.
import { PidfenceError } from '../base/errors';

export type SupervisorCycleFailure =
  'ERR_PIDFENCE_CYCLE_PAGE_OVERFLOW' | 'ERR_PIDFENCE_CYCLE_CURSOR_MISSING' | 'ERR_PIDFENCE_CYCLE_CURSOR_STUCK';

/**
 * A due page broke the keyset contract (overflow, a full page without a cursor, a cursor or item
 * that does not move strictly forward). The cycle stopped before dispatching anything of that page.
 */
export class SupervisorCycleError extends PidfenceError {
  constructor(code: SupervisorCycleFailure, detail: string) {
    super(
      `supervisor cycle failed closed: ${detail}; nothing of this page was dispatched. The store returned a page that breaks the due-page contract: check the store adapter.`,
      code,
    );
    this.name = 'SupervisorCycleError';
  }
}

/** start() while a timed-out cycle of an earlier run is still running (design/dispatch §2.6). */
export class RunnerDrainingError extends PidfenceError {
  constructor() {
    super(
      'the lifecycle runner cannot start while a cycle from before stop() is still running; await runner.drained() (or retry later) and call start() again.',
      'ERR_PIDFENCE_RUNNER_DRAINING',
    );
    this.name = 'RunnerDrainingError';
  }
}
