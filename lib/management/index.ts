// pidfence/management: the management plane (design/dispatch §5) over a
// ManagementStore, acting as one configured principal: inspect, rearm, summary, blocked page, and the
// run views list and show (docs/decisions/0140).
import {
  OVERDUE_AFTER_DEFAULT_MS,
  validateOverdueAfterMs,
  type DispatchInspection,
  type RearmExpectation,
} from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { principalOf, type Principal } from './authorization';
import { blockedPage, type BlockedPage } from './blocked-page';
import { inspectDispatch } from './inspect';
import { rearmDispatch, type RearmTestHooks } from './rearm';
import { showRun, type RunDetail } from './run-detail';
import { listRuns, type ListRunsRequest, type RunListPage } from './run-list';
import { projectSummary, type ProjectSummary } from './summary';

export {
  auditActor,
  authorize,
  authorizeImpersonation,
  notPermitted,
  NotPermittedError,
  principalOf,
} from './authorization';
export type { Principal } from './authorization';
export { checkedSummary, readExportedSummary } from './summary';
export { authorizeCancel, runFinished } from './cancel-authorization';
export type { CancelTarget } from './cancel-authorization';
export { authorizeRun, runNotVisible } from './visibility';
export type { ProjectSummary } from './summary';
export type { BlockedPage } from './blocked-page';
export { listRuns, runExitOf, RUN_LIST_PAGE_DEFAULT, RUN_LIST_PAGE_MAX } from './run-list';
export type { ListRunsRequest, RunExit, RunListItem, RunListPage } from './run-list';
export { showRun, RUN_DETAIL_ATTEMPTS_MAX, RUN_DETAIL_EVENTS_MAX } from './run-detail';
export type { AttemptView, RunDetail, RunEventView } from './run-detail';
export { RunNotVisibleError } from './visibility';
export type { VisibilityScope } from './visibility';
export type { RearmTestHooks } from './rearm';
export { ManagementError } from './errors';
export type { ManagementErrorCode } from './errors';
export type { GrantAdministration, GrantChange, ManagementStore } from '../store/management-store';

export interface ManagementPlaneOptions {
  readonly store: ManagementStore;
  /** The acting subject; it must hold grants like any other principal. */
  readonly principal: string;
  /** Who really asked, when acting as `principal` (docs/decisions/0044); needs grants.write on the project. */
  readonly authenticatedAs?: string;
  /** Due dispatches older than this make the summary attention_required (default 10 min). */
  readonly overdueAfterMs?: number;
  /** TEST ONLY. */
  readonly hooks?: RearmTestHooks;
}

export class ManagementPlane {
  readonly #store: ManagementStore;
  readonly #principal: Principal;
  readonly #overdueAfterMs: number;
  readonly #hooks: RearmTestHooks;

  constructor(options: ManagementPlaneOptions) {
    this.#store = options.store;
    this.#principal = principalOf(options.principal, options.authenticatedAs);
    this.#overdueAfterMs =
      options.overdueAfterMs === undefined ? OVERDUE_AFTER_DEFAULT_MS : validateOverdueAfterMs(options.overdueAfterMs);
    this.#hooks = options.hooks ?? {};
  }

  get subject(): string {
    return this.#principal.subject;
  }

  /** Needs run.read on the run's project. */
  inspect(runId: string): Promise<DispatchInspection> {
    return inspectDispatch(this.#store, this.#principal, runId);
  }

  /** Needs run.stop, checked up front and again inside the rearm transaction. */
  rearm(runId: string, expectation: RearmExpectation): Promise<DispatchInspection> {
    return rearmDispatch(this.#store, this.#principal, runId, expectation, this.#hooks);
  }

  /** Needs run.read on the project; read with the counts in one statement. */
  summary(projectId: string): Promise<ProjectSummary> {
    return projectSummary(this.#store, this.#principal, projectId, this.#overdueAfterMs);
  }

  /** Needs run.read on the project: one page of its runs, newest first (docs/decisions/0140). */
  listRuns(request: ListRunsRequest): Promise<RunListPage> {
    return listRuns(this.#store, this.#principal, request);
  }

  /** Needs run.read on the run's project; another project's run answers like a missing one. */
  showRun(runId: string): Promise<RunDetail> {
    return showRun(this.#store, this.#principal, runId);
  }

  /** Needs run.read on the project. */
  blockedPage(projectId: string, cursor?: string): Promise<BlockedPage> {
    return blockedPage(this.#store, this.#principal, projectId, cursor);
  }
}
