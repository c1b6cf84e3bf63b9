// Supervisor (design/dispatch §2.6): one bounded cycle per call over the store's due pages, keyset
// cursor from the store, fail closed on a page that breaks the contract. Owns no timer or thread.
import {
  DUE_PAGE_DEFAULT,
  DUE_PAGE_MAX,
  PAGES_PER_CYCLE_DEFAULT,
  PAGES_PER_CYCLE_MAX,
  validateBoundedInteger,
  type DueCursor,
  type DueItem,
  type DuePage,
} from '../contract/index';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { Dispatcher, DispatchOutcome, DispatchTarget } from './dispatcher';
import type { FailureFacts } from './diagnostics';
import { SupervisorCycleError } from './errors';
import { observerOf, type DispatchObserver } from './observer';

export interface SupervisorOptions {
  readonly repository: Pick<DispatchRepository, 'duePage'>;
  /**
   * With `dispatchPage`, the items of a page left after completeFirst are claimed together
   * (docs/decisions/0023); otherwise one by one.
   */
  readonly dispatcher: {
    dispatch(target: DispatchTarget): Promise<DispatchOutcome>;
    dispatchPage?(targets: readonly DispatchTarget[]): Promise<DispatchOutcome[]>;
    /**
     * Without completeFirst, each page is read and claimed in one transaction, and items another
     * supervisor is claiming are passed over instead of waited for (docs/decisions/0025).
     */
    dispatchDuePage?: Dispatcher['dispatchDuePage'];
  };
  /** Items per due page: default 32, hard max 64. */
  readonly pageSize?: number;
  /** Pages per cycle: default 4, hard max 64. */
  readonly pagesPerCycle?: number;
  /** Only cancellations of this runner's attempts (docs/decisions/0070); omitted: every one. */
  readonly runnerId?: string;
  /**
   * Called for each due item before its dispatch: a trusted completion (a receipt already on disk)
   * is consumed first, so a job that ended is never stopped. true: the attempt is terminal now.
   */
  readonly completeFirst?: (item: DueItem) => Promise<boolean>;
  /** Told when each cycle ends and whether it failed (metrics, docs/decisions/0110). */
  readonly observer?: Partial<DispatchObserver>;
}

/** What one cycle did; counts only, low-sensitivity. */
export interface CycleReport {
  readonly pages: number;
  readonly items: number;
  /** recorded results by status, plus stale fences and claims that were not granted. */
  readonly dispatched: number;
  readonly blocked: number;
  readonly retryWait: number;
  readonly staleFence: number;
  readonly notClaimed: number;
  /** Items whose attempt ended by a trusted completion before any stop (completeFirst). */
  readonly completedFirst: number;
  /** The store had more due items than this cycle's page budget: the next cycle continues. */
  readonly budgetExhausted: boolean;
  /** Each controller failure of the cycle (code and errno): what its runner reports to diagnostics. */
  readonly controllerFailures: readonly FailureFacts[];
}

function after(item: { atMs: number; runId: string }, cursor: DueCursor | null): boolean {
  if (cursor === null) return true;
  return item.atMs > cursor.atMs || (item.atMs === cursor.atMs && item.runId > cursor.runId);
}

export class Supervisor {
  readonly pageSize: number;
  readonly pagesPerCycle: number;
  readonly #repository: Pick<DispatchRepository, 'duePage'>;
  readonly #dispatcher: SupervisorOptions['dispatcher'];
  readonly #runnerId: string | undefined;
  readonly #completeFirst: SupervisorOptions['completeFirst'];
  readonly #observer: DispatchObserver;

  constructor(options: SupervisorOptions) {
    this.pageSize =
      options.pageSize === undefined
        ? DUE_PAGE_DEFAULT
        : validateBoundedInteger(options.pageSize, 'pageSize', 1, DUE_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
    this.pagesPerCycle =
      options.pagesPerCycle === undefined
        ? PAGES_PER_CYCLE_DEFAULT
        : validateBoundedInteger(
            options.pagesPerCycle,
            'pagesPerCycle',
            1,
            PAGES_PER_CYCLE_MAX,
            'ERR_PIDFENCE_INVALID_CYCLE_LIMIT',
          );
    this.#repository = options.repository;
    this.#dispatcher = options.dispatcher;
    this.#runnerId = options.runnerId;
    this.#completeFirst = options.completeFirst;
    this.#observer = observerOf(options.observer);
  }

  /**
   * One bounded cycle: at most pagesPerCycle pages of at most pageSize items, dispatched one at a
   * time. Rejects with SupervisorCycleError (nothing of the offending page dispatched) on a page that
   * overflows, lacks its cursor, or does not move strictly forward; store errors reject as they are.
   */
  async runCycle(): Promise<CycleReport> {
    try {
      const report = await this.#cycle();
      this.#observer.onCycle(false);
      return report;
    } catch (error) {
      this.#observer.onCycle(true);
      throw error;
    }
  }

  async #cycle(): Promise<CycleReport> {
    const counts = {
      pages: 0,
      items: 0,
      dispatched: 0,
      blocked: 0,
      retryWait: 0,
      staleFence: 0,
      notClaimed: 0,
      completedFirst: 0,
    };
    const controllerFailures: FailureFacts[] = [];
    const tally = (outcomes: readonly DispatchOutcome[]): void => {
      for (const outcome of outcomes) {
        if (outcome.kind !== 'not_claimed' && outcome.controllerFailure !== null)
          controllerFailures.push(outcome.controllerFailure);
        if (outcome.kind === 'not_claimed') counts.notClaimed += 1;
        else if (outcome.kind === 'stale_fence') counts.staleFence += 1;
        else if (outcome.status === 'dispatched') counts.dispatched += 1;
        else if (outcome.status === 'blocked') counts.blocked += 1;
        else counts.retryWait += 1;
      }
    };
    let cursor: DueCursor | null = null;
    while (counts.pages < this.pagesPerCycle) {
      const page = await this.#page(cursor, counts, tally);
      counts.pages += 1;
      if (page.next === null) return { ...counts, budgetExhausted: false, controllerFailures };
      cursor = page.next;
    }
    return { ...counts, budgetExhausted: true, controllerFailures };
  }

  /** One page: checked whole before any of its items is stopped; counted into `counts`. */
  async #page(
    cursor: DueCursor | null,
    counts: { items: number; notClaimed: number; completedFirst: number },
    tally: (outcomes: readonly DispatchOutcome[]) => void,
  ): Promise<DuePage> {
    const query = {
      limit: this.pageSize,
      ...(cursor === null ? {} : { after: cursor }),
      ...(this.#runnerId === undefined ? {} : { runnerId: this.#runnerId }),
    };
    const claimAsRead = this.#dispatcher.dispatchDuePage;
    if (this.#completeFirst === undefined && claimAsRead !== undefined) {
      const { page, outcomes, passedOver } = await claimAsRead.call(this.#dispatcher, query, (read) =>
        this.#checkPage(read, cursor),
      );
      counts.items += page.items.length;
      counts.notClaimed += passedOver;
      tally(outcomes);
      return page;
    }
    const page = await this.#repository.duePage(query);
    this.#checkPage(page, cursor);
    const open: DueItem[] = [];
    for (const item of page.items) {
      counts.items += 1;
      if (this.#completeFirst !== undefined && (await this.#completeFirst(item))) {
        counts.completedFirst += 1;
        continue;
      }
      open.push(item);
    }
    tally(await this.#dispatch(open));
    return page;
  }

  async #dispatch(items: readonly DueItem[]): Promise<DispatchOutcome[]> {
    if (items.length === 0) return [];
    if (this.#dispatcher.dispatchPage !== undefined) return this.#dispatcher.dispatchPage(items);
    const outcomes: DispatchOutcome[] = [];
    for (const item of items) outcomes.push(await this.#dispatcher.dispatch(item));
    return outcomes;
  }

  /** The whole page is checked before any item of it is dispatched. */
  #checkPage(page: DuePage, previous: DueCursor | null): void {
    if (!Array.isArray(page?.items))
      throw new SupervisorCycleError('ERR_PIDFENCE_CYCLE_CURSOR_MISSING', 'the due page has no item list');
    const items: readonly DueItem[] = page.items;
    if (items.length > this.pageSize) {
      throw new SupervisorCycleError(
        'ERR_PIDFENCE_CYCLE_PAGE_OVERFLOW',
        `the due page held ${items.length} items for a limit of ${this.pageSize}`,
      );
    }
    let last: DueCursor | null = previous;
    for (const item of items) {
      if (!after(item, last))
        throw new SupervisorCycleError(
          'ERR_PIDFENCE_CYCLE_CURSOR_STUCK',
          'a due item is not strictly after the previous one',
        );
      last = item;
    }
    if (page.next === undefined || (page.next === null && items.length === this.pageSize)) {
      throw new SupervisorCycleError('ERR_PIDFENCE_CYCLE_CURSOR_MISSING', 'a full due page came without a next cursor');
    }
    if (
      page.next !== null &&
      (items.length === 0 || !after(page.next, previous) || (last !== null && after(last, page.next)))
    ) {
      throw new SupervisorCycleError(
        'ERR_PIDFENCE_CYCLE_CURSOR_STUCK',
        'the next cursor does not advance past the page',
      );
    }
  }
}
