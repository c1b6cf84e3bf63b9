// Building blocks of the dispatch tests: cancelled runs bound to real processes, and real
// controller wrappers that count calls (delegating), throw, or stand in for a missing one.

import type { ExecutionContext } from 'ava';

import {
  ControllerRegistry,
  Dispatcher,
  type DispatcherOptions,
  type TerminationController,
} from '../../lib/dispatch/index';
import {
  LocalProcessController,
  formatHandle,
  handleFromIdentity,
  type TerminationOutcome,
  type TerminationRequest,
} from '../../lib/process/index';
import { spawnJob, type Job } from '../helpers/processes';
import type { TestStore } from '../helpers/stores';
import { cancelledRun, type CancelledRun } from '../helpers/cancelled-runs';

/** A grace short enough for tests; the lease below outlasts boundMs(GRACE_MS) + settle margin. */
export const GRACE_MS = 200;
export const LEASE_MS = 5_000;

export type Target = CancelledRun;

export function handleOf(job: Job): string {
  return formatHandle(handleFromIdentity(job.identity));
}

/** A started job (`sleep 30`, its own group leader) that the test stops through the verified path. */
export function startJob(t: ExecutionContext): Job {
  return spawnJob(t, 'sleep', ['30']);
}

/**
 * A runtime run with a running attempt and durable cancel intent. `binding` is the Attempt's PID
 * and handle (both or neither: the store writes them together); omitted → no handle at all.
 */
export async function cancelledRunFor(store: Pick<TestStore, 'runStore'>, job: Job): Promise<Target> {
  return cancelledRun(store.runStore, { running: { pid: job.identity.pid, handle: handleOf(job) } });
}

/** Delegates to a real controller and counts the calls. */
export class CountingController implements TerminationController {
  calls = 0;
  readonly #inner: TerminationController;

  constructor(inner: TerminationController = new LocalProcessController()) {
    this.#inner = inner;
  }

  get platform(): string {
    return this.#inner.platform;
  }

  boundMs(graceMs: number): number {
    return this.#inner.boundMs(graceMs);
  }

  async requestTermination(request: TerminationRequest): Promise<TerminationOutcome> {
    this.calls += 1;
    return this.#inner.requestTermination(request);
  }
}

/** A transient failure whose message carries what must never reach an event. */
export const SECRET_TEXT = 'EACCES /srv/secret/job.sh pid=4242 token=hunter2';

export class ThrowingController implements TerminationController {
  readonly platform = 'linux';
  calls = 0;

  /** `thrown`: what every call throws (default: an untyped Error whose text must never leak). */
  constructor(private readonly thrown: unknown = new Error(SECRET_TEXT)) {}

  boundMs(graceMs: number): number {
    return LocalProcessController.boundMs(graceMs);
  }

  async requestTermination(): Promise<TerminationOutcome> {
    this.calls += 1;
    throw this.thrown;
  }
}

export function dispatcherFor(
  connection: Pick<TestStore, 'repository' | 'runStore'>,
  controllers: readonly TerminationController[],
  options: Partial<DispatcherOptions> = {},
): Dispatcher {
  return new Dispatcher({
    repository: connection.repository,
    runStore: connection.runStore,
    controllers: new ControllerRegistry(controllers),
    graceMs: GRACE_MS,
    leaseDurationMs: LEASE_MS,
    ...options,
  });
}
