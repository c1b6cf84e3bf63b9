// showRun (docs/decisions/0140): one run with its attempts, events, cancellation dispatch and exit,
// for a holder of run.read on its project. A run of another project answers exactly like a missing
// one (docs/decisions/0043). Never a PID, handle, command, environment, runner, lease owner or token.
import { validateId, type DispatchInspection } from '../contract/index';
import type { ManagementStore, RunAttemptRow, RunEventRow } from '../store/management-store';
import type { Principal } from './authorization';
import { payloadObjectOf, runExitOf, runListItemOf, type RunExit, type RunListItem } from './run-list';
import { authorizeRun, runNotVisible } from './visibility';

/** A run normally has one attempt; more are shown up to this many. */
export const RUN_DETAIL_ATTEMPTS_MAX = 16;
/** Run events shown, oldest first; a run with more says so (`eventsTruncated`). */
export const RUN_DETAIL_EVENTS_MAX = 64;
/** Attempt events (terminal, adopted) over all shown attempts. */
export const RUN_DETAIL_ATTEMPT_EVENTS_MAX = 64;

/** An event as shown: its type, time and the low-sensitivity facts of its payload. */
export interface RunEventView {
  readonly seq: number;
  readonly type: string;
  readonly createdAtMs: number;
  /** Only these payload keys, each a string, number or null: what the event says, never who or which process. */
  readonly detail: Readonly<Record<string, string | number | null>>;
}

export interface AttemptView {
  readonly attemptId: string;
  readonly status: string;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  readonly deadlineAtMs: number | null;
  /** cgroup: a stop reaches every process it started; group: its process group and what the launcher sees (docs/decisions/0180). */
  readonly containment: 'cgroup' | 'group' | null;
  /**
   * `keep`: processes the job leaves behind were left running when it ended, in its cgroup or
   * wherever they went (docs/decisions/0302); `stop` (also when not recorded): they were stopped.
   */
  readonly leftovers: 'stop' | 'keep';
  /** How it ended; null while it is active. */
  readonly exit: RunExit | null;
  /** Its `attempt.terminal` and `attempt.adopted` events. */
  readonly events: readonly RunEventView[];
}

/** One run as `show` gives it: the list's facts, its project and cancel time, attempts, events and dispatch. */
export interface RunDetail extends RunListItem {
  readonly projectId: string;
  /** When the stop was asked for (the store's clock); null when nobody asked. */
  readonly cancelRequestedAtMs: number | null;
  readonly attempts: readonly AttemptView[];
  readonly attemptsTruncated: boolean;
  readonly events: readonly RunEventView[];
  readonly eventsTruncated: boolean;
  /** The cancellation dispatch (as `inspect` shows it), or null when no stop was ever claimed. */
  readonly dispatch: DispatchInspection | null;
}

/** The payload keys any pidfence event uses; a key outside this list is never shown. */
const DETAIL_KEYS = [
  'attemptId',
  'reason',
  'status',
  'result',
  'dispatchCount',
  'cause',
  'exitCode',
  'signal',
  'proof',
  'runner',
] as const;
const DETAIL_TEXT_MAX = 128;

function detailOf(payload: unknown): Record<string, string | number | null> {
  const value = payloadObjectOf(payload) ?? {};
  const detail: Record<string, string | number | null> = {};
  for (const key of DETAIL_KEYS) {
    const field = value[key];
    if (
      field === null ||
      (typeof field === 'number' && Number.isFinite(field)) ||
      (typeof field === 'string' && field.length <= DETAIL_TEXT_MAX)
    )
      detail[key] = field;
  }
  return detail;
}

function eventViewOf(row: RunEventRow): RunEventView {
  return { seq: row.seq, type: row.type, createdAtMs: row.createdAtMs, detail: detailOf(row.payload) };
}

function attemptViewOf(row: RunAttemptRow, events: readonly RunEventRow[]): AttemptView {
  const own = events.filter((event) => event.attemptId === row.attemptId);
  const terminal = own.find((event) => event.type === 'attempt.terminal');
  return {
    attemptId: row.attemptId,
    status: row.status,
    createdAtMs: row.createdAtMs,
    updatedAtMs: row.updatedAtMs,
    deadlineAtMs: row.deadlineAtMs,
    containment: row.containment,
    leftovers: row.leftovers === 'keep' ? 'keep' : 'stop',
    exit: terminal === undefined ? null : runExitOf(terminal.payload),
    events: own.map(eventViewOf),
  };
}

export async function showRun(store: ManagementStore, principal: Principal, runId: string): Promise<RunDetail> {
  const id = validateId(runId, 'runId');
  // One row more than shown tells whether there are more, without a second query.
  const rows = await store.runDetail(id, {
    attempts: RUN_DETAIL_ATTEMPTS_MAX + 1,
    attemptEvents: RUN_DETAIL_ATTEMPT_EVENTS_MAX,
    events: RUN_DETAIL_EVENTS_MAX + 1,
  });
  await authorizeRun(store, principal, id, rows?.run.projectId ?? null, 'run.read');
  if (rows === null) throw runNotVisible(id);
  return {
    ...runListItemOf(rows.run),
    projectId: rows.run.projectId,
    cancelRequestedAtMs: rows.run.cancelRequestedAtMs,
    attempts: rows.attempts
      .slice(0, RUN_DETAIL_ATTEMPTS_MAX)
      .map((attempt) => attemptViewOf(attempt, rows.attemptEvents)),
    attemptsTruncated: rows.attempts.length > RUN_DETAIL_ATTEMPTS_MAX,
    events: rows.events.slice(0, RUN_DETAIL_EVENTS_MAX).map(eventViewOf),
    eventsTruncated: rows.events.length > RUN_DETAIL_EVENTS_MAX,
    dispatch: rows.dispatch,
  };
}
