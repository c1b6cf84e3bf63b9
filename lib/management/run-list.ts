// listRuns (docs/decisions/0140): one page of a project's runs, newest first, for a holder of
// run.read on the project — state, creation, start, end, exit and the reason a run was stopped.
// Paged by a (createdAtMs, runId) keyset cursor like the blocked page (design/dispatch §5.4); the
// `pidfence list` command and any status page are built on this one read.
import {
  COMPLETION_CAUSES,
  decodeRunListCursor,
  encodeRunListCursor,
  validateBoundedInteger,
  validateId,
  validateRunStatus,
  EPOCH_MS_MAX,
  type CancelReason,
  type CompletionCause,
  type RunListPosition,
  type RunStatus,
} from '../contract/index';
import { SIGNAL_NAME_PATTERN } from '../base/limits';
import type { ManagementStore, RunRow } from '../store/management-store';
import { authorize, type Principal } from './authorization';
import { ManagementError } from './errors';

/** Runs on one page unless the caller asks for another size. */
export const RUN_LIST_PAGE_DEFAULT = 20;
/** The most runs one page may hold: every page is one bounded read. */
export const RUN_LIST_PAGE_MAX = 100;

/** What to list. Only `projectId` is required. */
export interface ListRunsRequest {
  readonly projectId: string;
  /** Only runs in this state (queued, running, succeeded, failed, cancelled, timed_out); omitted: all. */
  readonly state?: RunStatus;
  /** The `next` of the previous page; omitted: the newest runs. It carries the project and state it was made for. */
  readonly cursor?: string;
  /** Runs per page, 1 to RUN_LIST_PAGE_MAX (default RUN_LIST_PAGE_DEFAULT). */
  readonly limit?: number;
}

/**
 * How an attempt ended, from its `attempt.terminal` event: the job's own exit code or the signal that
 * ended it (from the completion receipt), and the cause — `receipt` (the job reported its end),
 * `stopped` (its group was proved gone after a stop, no receipt), `lost` (proved gone without a stop
 * or receipt) or `never_started`.
 */
export interface RunExit {
  readonly cause: CompletionCause;
  readonly exitCode: number | null;
  readonly signal: string | null;
}

/** One run as listed: identity, state and times only — never a PID, handle, command or environment. */
export interface RunListItem {
  readonly runId: string;
  /** The name it was given (`run --name`, docs/decisions/0251); null when none. */
  readonly name: string | null;
  readonly status: RunStatus;
  /** Why a stop was asked for (user, policy, timeout, shutdown); null when nobody asked. */
  readonly cancelReason: CancelReason | null;
  /** When the run was admitted (the store's clock, epoch ms). */
  readonly createdAtMs: number;
  /** When its first attempt was created; null while none was. */
  readonly startedAtMs: number | null;
  /** When it reached its terminal state; null while it is queued or running. */
  readonly endedAtMs: number | null;
  /** How its latest attempt ended; null while no attempt ended. */
  readonly exit: RunExit | null;
  /**
   * What a stop of its latest attempt reaches (docs/decisions/0180): `cgroup`, every process the job
   * started; `group`, its process group and what its launcher sees; null while no attempt had a handle.
   */
  readonly containment: 'cgroup' | 'group' | null;
}

export interface RunListPage {
  readonly projectId: string;
  /** The state filter of this walk; null: every state. */
  readonly state: RunStatus | null;
  /** Newest first, at most the page size. */
  readonly items: readonly RunListItem[];
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  readonly next: string | null;
}

/** A stored event payload as an object: SQLite keeps JSON text, PostgreSQL's driver parses it. */
export function payloadObjectOf(payload: unknown): Readonly<Record<string, unknown>> | null {
  let value = payload;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return null;
    }
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/**
 * The exit facts of a stored `attempt.terminal` payload. Only these three keys are read, each
 * checked; anything else in the payload is never passed on.
 */
export function runExitOf(payload: unknown): RunExit | null {
  const value = payloadObjectOf(payload);
  if (value === null) return null;
  const { cause, exitCode, signal } = value;
  if (!COMPLETION_CAUSES.includes(cause as CompletionCause)) return null;
  return {
    cause: cause as CompletionCause,
    exitCode:
      Number.isInteger(exitCode) && (exitCode as number) >= 0 && (exitCode as number) <= 255
        ? (exitCode as number)
        : null,
    signal: typeof signal === 'string' && SIGNAL_NAME_PATTERN.test(signal) ? signal : null,
  };
}

/** A stored run row as a list item; shared with showRun. */
export function runListItemOf(row: RunRow): RunListItem {
  return {
    runId: row.runId,
    name: row.name ?? null,
    status: row.status,
    cancelReason: row.cancelReason,
    createdAtMs: row.createdAtMs,
    startedAtMs: row.startedAtMs,
    endedAtMs: row.endedAtMs,
    exit: row.terminal === null ? null : runExitOf(row.terminal),
    containment: row.containment === 'cgroup' || row.containment === 'group' ? row.containment : null,
  };
}

/** Before every run: the first page's position (the keyset is strictly-before). */
const NEWEST: RunListPosition = { createdAtMs: EPOCH_MS_MAX + 1, runId: '' };

export async function listRuns(
  store: ManagementStore,
  principal: Principal,
  request: ListRunsRequest,
): Promise<RunListPage> {
  const projectId = validateId(request.projectId, 'projectId');
  const limit =
    request.limit === undefined
      ? RUN_LIST_PAGE_DEFAULT
      : validateBoundedInteger(request.limit, 'limit', 1, RUN_LIST_PAGE_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT');
  let state = request.state === undefined ? null : validateRunStatus(request.state);
  let before = NEWEST;
  if (request.cursor !== undefined) {
    const cursor = decodeRunListCursor(request.cursor);
    if (cursor.projectId !== projectId) {
      throw new ManagementError(
        `this cursor belongs to another project's run list, not ${projectId}; start again without a cursor.`,
        'ERR_PIDFENCE_CURSOR_PROJECT',
      );
    }
    if (state !== null && cursor.status !== state) {
      throw new ManagementError(
        `this cursor belongs to the list of ${cursor.status ?? 'all'} runs, not ${state} ones; pass the same --state as for its first page, or start again without a cursor.`,
        'ERR_PIDFENCE_CURSOR_FILTER',
      );
    }
    state = cursor.status;
    before = cursor.after;
  }
  await authorize(store, principal, projectId, 'run.read');
  // One row more than a page tells whether another page exists, without a second query.
  const rows = await store.runRows({ projectId, status: state, before, limit: limit + 1 });
  const items = rows.slice(0, limit).map(runListItemOf);
  const last = items[items.length - 1];
  const next =
    rows.length > limit && last !== undefined
      ? encodeRunListCursor({ projectId, status: state, after: { createdAtMs: last.createdAtMs, runId: last.runId } })
      : null;
  return { projectId, state, items, next };
}
