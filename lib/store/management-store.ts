// The management store interface both stores implement (design/dispatch §5):
// the reads and the one write (rearm) the management plane needs, and the owner-only grant writes.
// The store is the time authority here too: no method takes "now".
import type {
  BlockedItem,
  CancelReason,
  DispatchInspection,
  Permission,
  RearmCommand,
  RearmOutcome,
  RunListPosition,
  RunStatus,
  SummaryCounts,
} from '../contract/index';

/** Where a blocked page starts: the first page (no pin yet) or after a row, pinned at `asOfMs`. */
export type BlockedPosition =
  { readonly kind: 'first' } | { readonly kind: 'after'; readonly asOfMs: number; readonly after: BlockedItem };

export interface BlockedRows {
  /** The first page's database time (read by the store), or the pinned time of a later page. */
  readonly asOfMs: number;
  /** At most `limit` rows in `(blockedAtMs, runId)` order, none blocked after `asOfMs`. */
  readonly rows: readonly BlockedItem[];
}

/** One page of a project's runs (docs/decisions/0140): newest first, strictly before `before`. */
export interface RunRowsQuery {
  readonly projectId: string;
  /** Only runs in this status; null: every status. */
  readonly status: RunStatus | null;
  /** The last run of the previous page, or a position after every run for the first page. */
  readonly before: RunListPosition;
  readonly limit: number;
}

/**
 * A run as `list` and `show` read it: the run's own low-sensitivity columns and three facts read
 * with it — when its first attempt was created, when it ended (its `run.terminal` event) and the
 * `attempt.terminal` payload of its latest attempt (status, cause, exit code, signal) as stored.
 */
export interface RunRow {
  readonly runId: string;
  /** The run's name (docs/decisions/0251), or null. */
  readonly name: string | null;
  readonly status: RunStatus;
  readonly cancelReason: CancelReason | null;
  readonly cancelRequestedAtMs: number | null;
  readonly createdAtMs: number;
  readonly startedAtMs: number | null;
  readonly endedAtMs: number | null;
  /** Text on SQLite, parsed JSON on PostgreSQL; null while no attempt ended. */
  readonly terminal: unknown;
  /** The latest attempt's containment (docs/decisions/0180); null while none had a handle. */
  readonly containment: 'cgroup' | 'group' | null;
}

export interface RunAttemptRow {
  readonly attemptId: string;
  readonly status: string;
  readonly deadlineAtMs: number | null;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** What a stop of it reaches (docs/decisions/0180): its own cgroup, or its process group; null before it had a handle. */
  readonly containment: 'cgroup' | 'group' | null;
  /** What its launcher does with leftovers, as recorded (docs/decisions/0302); null: not stated (stop). */
  readonly leftovers: 'stop' | 'keep' | null;
}

/** A run or attempt event as stored; `attemptId` is null for a run event. The payload as the driver gives it. */
export interface RunEventRow {
  readonly attemptId: string | null;
  readonly seq: number;
  readonly type: string;
  readonly payload: unknown;
  readonly createdAtMs: number;
}

/** Limits of one `show` read: each list is read with at most this many rows. */
export interface RunDetailLimits {
  readonly attempts: number;
  readonly attemptEvents: number;
  readonly events: number;
}

export interface RunDetailRows {
  readonly run: RunRow & { readonly projectId: string };
  /** Oldest first. */
  readonly attempts: readonly RunAttemptRow[];
  /** By attempt (oldest first), then sequence. */
  readonly attemptEvents: readonly RunEventRow[];
  /** The run's events in sequence order. */
  readonly events: readonly RunEventRow[];
  readonly dispatch: DispatchInspection | null;
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
  /** One keyset page of a project's runs from the per-project run indexes (docs/decisions/0140); at most `limit` rows. */
  runRows(query: RunRowsQuery): Promise<readonly RunRow[]>;
  /**
   * One run with its attempts, events and dispatch, read in one transaction; null when there is no
   * such run. Never a PID, handle, receipt digest, runner, lease owner or token: those columns are
   * not selected.
   */
  runDetail(runId: string, limits: RunDetailLimits): Promise<RunDetailRows | null>;
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
