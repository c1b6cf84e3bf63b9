// Deadlines (design/execution §3): a due deadline first becomes durable `timeout` cancel intent (cancel
// reason, time and `run.cancel_requested` in one transaction); only the dispatch path, which reads
// durable intent, may then stop the process. A store failure rejects: no intent, so no signal.
import { randomUUID } from 'node:crypto';

import type { ExecutionStore } from '../store/execution-store';
import type { RunStore } from '../store/run-store';

export interface DeadlinePass {
  readonly due: number;
  /** Intent written now. */
  readonly requested: number;
  /** The run already had intent (user/policy/shutdown kept) or ended meanwhile. */
  readonly kept: number;
}

export class DeadlineSource {
  readonly #store: Pick<ExecutionStore, 'dueDeadlinesPage' | 'nextDueInMs'>;
  readonly #runStore: Pick<RunStore, 'requestCancellation'>;
  readonly #pageSize: number;
  readonly #runnerId: string | undefined;

  constructor(options: {
    readonly executionStore: Pick<ExecutionStore, 'dueDeadlinesPage' | 'nextDueInMs'>;
    readonly runStore: Pick<RunStore, 'requestCancellation'>;
    readonly pageSize: number;
    /** Only this runner's attempts (docs/decisions/0070); omitted: every attempt of the store. */
    readonly runnerId?: string;
  }) {
    this.#store = options.executionStore;
    this.#runStore = options.runStore;
    this.#pageSize = options.pageSize;
    this.#runnerId = options.runnerId;
  }

  /**
   * How long until this runner's next deadline or dispatch retry falls due (null: none, or no
   * runner to ask about): the lifecycle arms its one timer for it (docs/decisions/0176). The
   * delay is a difference of two readings of the store's clock (boot-anchored on SQLite, the
   * database's on PostgreSQL), so no wall-clock step moves it (docs/decisions/0160).
   */
  nextDueInMs(): Promise<number | null> {
    return this.#runnerId === undefined ? Promise.resolve(null) : this.#store.nextDueInMs(this.#runnerId);
  }

  /** One page of due deadlines: each turned into `timeout` intent, one transaction each. */
  async runPage(): Promise<DeadlinePass> {
    const page = await this.#store.dueDeadlinesPage({
      limit: this.#pageSize,
      ...(this.#runnerId === undefined ? {} : { runnerId: this.#runnerId }),
    });
    let requested = 0;
    for (const item of page.items) {
      const outcome = await this.#runStore.requestCancellation({
        runId: item.runId,
        reason: 'timeout',
        eventId: `evt-${randomUUID()}`,
      });
      if (outcome.kind === 'requested') requested += 1;
    }
    return { due: page.items.length, requested, kept: page.items.length - requested };
  }
}
