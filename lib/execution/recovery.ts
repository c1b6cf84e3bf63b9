// Startup recovery (design/execution §1): the same completion processor as online completion. Before
// admission opens, every active attempt is looked at once (bounded pages): finished jobs are found
// by their receipts, running ones by their handles; nothing unprovable is signalled or guessed.
import type { ExecutionStore } from '../store/execution-store';
import type { CompletionOutcome, CompletionProcessor } from './completion-processor';

/** Pages one recovery pass may read; the periodic page continues past it. */
export const RECOVERY_PAGES_MAX = 64;

export interface RecoveryReport {
  readonly completed: number;
  readonly running: number;
  readonly unproven: number;
  readonly quarantined: number;
  readonly pageBudgetExhausted: boolean;
}

export async function recoverExecutions(options: {
  readonly executionStore: ExecutionStore;
  readonly processor: CompletionProcessor;
  readonly pageSize: number;
  readonly pages?: number;
  /** Only this runner's attempts (its own and those it adopted); omitted: every one of the store. */
  readonly runnerId?: string;
}): Promise<RecoveryReport> {
  const counts = { completed: 0, running: 0, unproven: 0, quarantined: 0 };
  const tally = (outcome: CompletionOutcome): void => {
    if (outcome.kind === 'completed' || outcome.kind === 'terminal') counts.completed += 1;
    else if (outcome.kind === 'active') counts.running += 1;
    else if (outcome.kind === 'unproven') counts.unproven += 1;
    else if (outcome.kind === 'quarantined') counts.quarantined += 1;
  };
  let after: { runId: string } | null = null;
  const pages = Math.min(options.pages ?? RECOVERY_PAGES_MAX, RECOVERY_PAGES_MAX);
  for (let read = 0; read < pages; read += 1) {
    const page = await options.executionStore.activeAttemptsPage({
      limit: options.pageSize,
      ...(after === null ? {} : { after }),
      ...(options.runnerId === undefined ? {} : { runnerId: options.runnerId }),
    });
    // Admission is not open yet: a `claimed` attempt without intent can never be spawning now.
    for (const item of page.items) tally(await options.processor.process(item, { allowNeverStarted: true }));
    if (page.next === null) return { ...counts, pageBudgetExhausted: false };
    after = page.next;
  }
  return { ...counts, pageBudgetExhausted: true };
}
