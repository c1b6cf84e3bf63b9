// The management store interface both stores implement (design/dispatch §5):
// the reads and the one write (rearm) the management plane needs, and the owner-only grant writes.
// The store is the time authority here too: no method takes "now".
import type {
  BlockedItem,
  DispatchInspection,
  Permission,
  RearmCommand,
  RearmOutcome,
  SummaryCounts,
} from '../contract/index';

/** Where a blocked page starts: the first page (no pin yet) or after a row, pinned at `asOfMs`. */
export type BlockedPosition = { readonly kind: 'first' } | { readonly kind: 'after'; readonly asOfMs: number; readonly after: BlockedItem };

export interface BlockedRows {
  /** The first page's database time (read by the store), or the pinned time of a later page. */
  readonly asOfMs: number;
  /** At most `limit` rows in `(blockedAtMs, runId)` order, none blocked after `asOfMs`. */
  readonly rows: readonly BlockedItem[];
}

export interface ManagementStore {
  /** Whether `subject` holds `permission` on `projectId`, from the grants table. */
  hasPermission(subject: string, projectId: string, permission: Permission): Promise<boolean>;
  /** The low-sensitivity facts of a run's dispatch, or null when it has none. */
  inspectDispatch(runId: string): Promise<DispatchInspection | null>;
  /**
   * Exact CAS from `blocked` to a `retry_wait` due at the store's now (design/dispatch §5.1), in one transaction
   * with a `run.cancel_dispatch_rearmed` event and a management-audit row. The subject's `run.stop`
   * is re-read inside that transaction; any mismatch is an outcome and nothing is written.
   */
  rearm(command: RearmCommand): Promise<RearmOutcome>;
  /**
   * Every count of the project and the subject's `run.read`, from one statement (design/dispatch §5.2-5.3).
   * A null subject reads no grant (`permitted` false): the metrics of an operator's allowlist (docs/decisions/0112).
   */
  summaryCounts(subject: string | null, projectId: string, overdueAfterMs: number): Promise<SummaryCounts>;
  /** One keyset page of the project's blocked dispatches from the per-project partial index (design/dispatch §5.4). */
  blockedRows(projectId: string, position: BlockedPosition, limit: number): Promise<BlockedRows>;
}

export interface GrantChange {
  readonly subject: string;
  readonly projectId: string;
  readonly permission: Permission;
}

/**
 * Grant writes, for the store owner only (docs/decisions/0040): on PostgreSQL the runtime role may
 * only read grants, so this is built on the migration owner's connection; on SQLite whoever may
 * write the file is its owner.
 */
export interface GrantAdministration extends Pick<ManagementStore, 'hasPermission'> {
  /** How many grants exist at all (bootstrap is allowed only on zero). */
  countGrants(): Promise<number>;
  /** `grantedBy` is recorded with the grant. */
  writeGrant(change: GrantChange, grantedBy: string): Promise<'granted' | 'exists'>;
  revokeGrant(change: GrantChange): Promise<'revoked' | 'absent'>;
  /** The grants of a subject, for `pidfence grant --list`. */
  listGrants(subject: string): Promise<ReadonlyArray<{ readonly projectId: string; readonly permission: Permission }>>;
}
