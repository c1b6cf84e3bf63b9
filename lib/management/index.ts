// pidfence/management: the management plane (design/dispatch §5) over a
// ManagementStore, acting as one configured principal: inspect, rearm, summary, blocked page.
import { OVERDUE_AFTER_DEFAULT_MS, validateOverdueAfterMs, type DispatchInspection, type RearmExpectation } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { principalOf, type Principal } from './authorization';
import { blockedPage, type BlockedPage } from './blocked-page';
import { inspectDispatch } from './inspect';
import { rearmDispatch, type RearmTestHooks } from './rearm';
import { projectSummary, type ProjectSummary } from './summary';

export { auditActor, authorize, authorizeImpersonation, notPermitted, principalOf } from './authorization';
export type { Principal } from './authorization';
export { checkedSummary, readExportedSummary } from './summary';
export { authorizeCancel } from './cancel-authorization';
export type { CancelTarget } from './cancel-authorization';
export { authorizeRun, runNotVisible } from './visibility';
export type { ProjectSummary } from './summary';
export type { BlockedPage } from './blocked-page';
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
    this.#overdueAfterMs = options.overdueAfterMs === undefined ? OVERDUE_AFTER_DEFAULT_MS : validateOverdueAfterMs(options.overdueAfterMs);
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

  /** Needs run.read on the project. */
  blockedPage(projectId: string, cursor?: string): Promise<BlockedPage> {
    return blockedPage(this.#store, this.#principal, projectId, cursor);
  }
}
