// summary(projectId) (design/dispatch §5.2, gate 16): counts of the five states and of each blocking result,
// cross-checked, the running jobs, and a three-state assessment. One store statement; no run, attempt or lease
// identity in the answer. A blocked run raises attention; it does not withdraw global readiness.
import {
  BLOCKING_RESULTS,
  DISPATCH_STATUSES,
  validateId,
  type Assessment,
  type BlockingCounts,
  type StateCounts,
  type SummaryCounts,
} from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { authorizeImpersonation, notPermitted, type Principal } from './authorization';
import { ManagementError } from './errors';

export interface ProjectSummary {
  readonly projectId: string;
  /** The database time the counts were read at. */
  readonly asOfMs: number;
  readonly total: number;
  readonly states: StateCounts;
  readonly blockingResults: BlockingCounts;
  /** Due or lease-expired dispatches of active runs older than overdueAfterMs: the dispatcher is not keeping up. */
  readonly overdue: number;
  readonly overdueAfterMs: number;
  /** Dispatches still pending, leased or retrying whose run has ended: not in flight (docs/decisions/0140). */
  readonly runEnded: number;
  /** Jobs of the project running now (attempts in `running`): they keep the assessment `converging` (docs/decisions/0140). */
  readonly running: number;
  readonly assessment: Assessment;
}

const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);

/** The cross-checks of gate 16: a mismatch means the counts cannot be trusted, so it is an error. */
export function checkedSummary(projectId: string, counts: SummaryCounts, overdueAfterMs: number): ProjectSummary {
  const stateTotal = sum(DISPATCH_STATUSES.map((status) => counts.states[status]));
  const blockingTotal = sum(BLOCKING_RESULTS.map((result) => counts.blockingResults[result]));
  const active = counts.states.pending + counts.states.leased + counts.states.retry_wait;
  const broken = [
    ...(stateTotal !== counts.total ? [`the five states add up to ${stateTotal}, not the total ${counts.total}`] : []),
    ...(blockingTotal !== counts.states.blocked
      ? [`the blocking results add up to ${blockingTotal}, not blocked ${counts.states.blocked}`]
      : []),
    ...(counts.overdue + counts.runEnded > active
      ? [`overdue ${counts.overdue} and run-ended ${counts.runEnded} exceed the ${active} active dispatches`]
      : []),
  ];
  if (broken.length > 0) {
    throw new ManagementError(
      `the summary of project ${projectId} does not add up (${broken.join('; ')}); the store holds rows outside the dispatch rules. Run the store's readiness check and inspect the project's dispatches.`,
      'ERR_PIDFENCE_SUMMARY_INCONSISTENT',
    );
  }
  // docs/decisions/0140: a running job is work in flight like an unsettled stop of a live run; blocked or
  // overdue still win.
  const inFlight = active - counts.runEnded;
  const assessment: Assessment =
    counts.states.blocked > 0 || counts.overdue > 0
      ? 'attention_required'
      : inFlight > 0 || counts.running > 0
        ? 'converging'
        : 'clear';
  return {
    projectId,
    asOfMs: counts.asOfMs,
    total: counts.total,
    states: { ...counts.states },
    blockingResults: { ...counts.blockingResults },
    overdue: counts.overdue,
    overdueAfterMs,
    runEnded: counts.runEnded,
    running: counts.running,
    assessment,
  };
}

export async function projectSummary(
  store: ManagementStore,
  principal: Principal,
  projectId: string,
  overdueAfterMs: number,
): Promise<ProjectSummary> {
  const id = validateId(projectId, 'projectId');
  // The grant is read by the same statement as the counts: exactly one query (gate 17).
  const counts = await store.summaryCounts(principal.subject, id, overdueAfterMs);
  if (!counts.permitted) throw notPermitted(principal.subject, 'run.read', id);
  await authorizeImpersonation(store, principal, id);
  return checkedSummary(id, counts, overdueAfterMs);
}

/**
 * The summary of a project the process's operator listed for metrics (docs/decisions/0112): read
 * with no principal and no grant, because the operator who starts the server chose to export it.
 */
export async function readExportedSummary(
  store: Pick<ManagementStore, 'summaryCounts'>,
  projectId: string,
  overdueAfterMs: number,
): Promise<ProjectSummary> {
  const id = validateId(projectId, 'projectId');
  return checkedSummary(id, await store.summaryCounts(null, id, overdueAfterMs), overdueAfterMs);
}
