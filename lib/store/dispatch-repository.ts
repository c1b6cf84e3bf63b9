// The CancellationDispatch repository interface both stores implement (design/dispatch §2.2, §2.4, §2.6;
// design/postgres §D3, §D7-D8). Promise-returning because PostgreSQL is async; outcomes are values.
import type {
  CancellationDispatchRecord,
  ClaimCommand,
  ClaimOutcome,
  ClaimDuePageCommand,
  ClaimedDuePage,
  ClaimPageCommand,
  DuePage,
  DuePageQuery,
  RecordResultCommand,
  RecordResultOutcome,
} from '../contract/index';

export interface DispatchRepository {
  /**
   * Atomically claims the lease on a run's cancellation (design/dispatch §2.2). The repository reads its own
   * clock; the raw token comes back only in a `claimed` outcome and is stored only as a digest.
   * Rejects (before any SQL) with a PidfenceTypeError/RangeError when the command is malformed.
   */
  claim(command: ClaimCommand): Promise<ClaimOutcome>;

  /**
   * Claims a supervisor page in one transaction (docs/decisions/0023): every item is decided and
   * fenced exactly as its own `claim` would be, rows locked in run-id order; the outcomes come back
   * in the page's order. A store failure fails the whole page (nothing claimed).
   */
  claimPage(command: ClaimPageCommand): Promise<ClaimOutcome[]>;

  /**
   * Reads the next due page and claims its items in one transaction (docs/decisions/0025): the
   * items `duePage` would list for `tokens.length`, each decided as its own `claim` with the token
   * of its position. Where rows are locked (PostgreSQL), an item whose run another transaction holds
   * is `passed_over` instead of waited for, so supervisors sharing a store take disjoint items.
   */
  claimDuePage(command: ClaimDuePageCommand): Promise<ClaimedDuePage>;

  /**
   * Settles a lease (design/dispatch §2.4): in one transaction the dispatch moves to the classified status, the
   * run version is CAS-advanced to reserve the next event sequence, and the RunEvent is appended.
   * Any fence mismatch (run, attempt, owner, token digest, version) is `stale_fence`.
   */
  recordResult(command: RecordResultCommand): Promise<RecordResultOutcome>;

  /**
   * Settles several leases in one transaction (docs/decisions/0023): each exactly as its own
   * `recordResult` (own fence, own run CAS, own event), rows locked in run-id order; outcomes in
   * the commands' order. A store failure fails them all (nothing settled).
   */
  recordResults(commands: readonly RecordResultCommand[]): Promise<RecordResultOutcome[]>;

  /**
   * At most `limit` (≤ 64) due items in `(atMs, runId)` keyset order: pending records (written
   * with the cancel request), leased records whose lease expired (recovery), and retry_wait
   * records whose due time passed (docs/decisions/0022). `next` is set when the page is full.
   */
  duePage(query?: DuePageQuery): Promise<DuePage>;

  /** The record for a run, or null. For the management plane and tests; it holds the digest, never the token. */
  getRecord(runId: string): Promise<CancellationDispatchRecord | null>;
}
