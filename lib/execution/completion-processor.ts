// The one completion processor (design/execution §1-3), shared by online completion, the periodic page,
// the shutdown drain and startup recovery: reread attempt and run, authenticate the exact receipt,
// commit attempt and run terminal states with their events in one transaction, and only then
// delete the receipt. A late or repeated receipt never rewrites a terminal state; an invalid one is
// quarantined after its intent was saved. Without a receipt, an attempt ends only on proof.
import { randomUUID } from 'node:crypto';

import {
  type AttemptRecord,
  cancelIntentStatus,
  type CompleteAttemptCommand,
  type CompleteAttemptOutcome,
  type CompletionCause,
  EXECUTION_PAGE_MAX,
  neverStartedStatus,
  type QuarantineReason,
  RUN_TERMINAL_STATUSES,
  type RunRecord,
  type RunTerminalStatus,
} from '../contract/index';
import { observerOf, type DispatchObserver } from '../dispatch/index';
import { bootNow } from '../native/index';
import { groupLiveness, HeldGroups, removeEndedJobCgroup } from '../process/index';
import type { ExecutionStore } from '../store/execution-store';
import type { RunStore } from '../store/run-store';
import type { AttemptRef } from './notices';
import { finishOnStoreClock, receiptTimesImpossible } from './receipt-time';
import {
  RECEIPT_CALLBACK_SEQ,
  digestsEqual,
  deleteReceipt,
  quarantineReceipt,
  readReceipt,
  receiptTokenDigest,
  type CompletionReceipt,
} from './receipts';
import { startFailureOfStatus, type StartFailure } from './start-failure';

/** Low-sensitivity: no PID, handle, token or command. */
export type CompletionOutcome =
  | {
      readonly kind: 'completed';
      readonly status: RunTerminalStatus;
      readonly cause: CompletionCause;
      readonly exitCode: number | null;
      readonly signal: string | null;
      /** The job could not be started at all (its receipt says so; exitCode is 126 or 127): see start-failure.ts. */
      readonly startFailure: StartFailure | null;
    }
  /** The attempt was terminal already; a receipt found for it was authenticated and cleaned up. */
  | { readonly kind: 'terminal'; readonly status: RunTerminalStatus; readonly lateReceipt: boolean }
  | { readonly kind: 'quarantined'; readonly reason: QuarantineReason }
  /** Still active: no receipt and the process is alive (or not started yet). */
  | { readonly kind: 'active' }
  /** Still active: no receipt and nothing proves the process gone (no handle, unsupported, mismatch). */
  | { readonly kind: 'unproven' }
  | { readonly kind: 'missing' };

export interface CompletionProcessorOptions {
  readonly runStore: Pick<RunStore, 'getRun' | 'getAttempt'>;
  readonly executionStore: ExecutionStore;
  readonly receiptDirectory: string;
  /** The job groups this runner holds (a fresh, empty set when omitted). */
  readonly heldGroups?: HeldGroups;
  /** Told how long after its cancel intent a stopped job was seen ended (docs/decisions/0110). */
  readonly observer?: Partial<DispatchObserver>;
  /**
   * Whether this process's admission may still start the attempt (docs/decisions/0310); omitted:
   * nothing is admitted here.
   */
  readonly isAdmitting?: (attemptId: string) => boolean;
}

function isTerminal(status: string): status is RunTerminalStatus {
  return (RUN_TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * Cancel intent that came before the job finished decides; a job that finished first keeps its exit.
 * `finishedOnStoreMs`: the receipt's finish on the store clock (receipt-time.ts).
 */
export function statusForReceipt(
  receipt: CompletionReceipt,
  run: RunRecord,
  finishedOnStoreMs: number = receipt.finishedAtMs,
): RunTerminalStatus {
  if (run.cancelRequestedAtMs !== null && finishedOnStoreMs >= run.cancelRequestedAtMs) return cancelIntentStatus(run);
  return receipt.exitCode === 0 ? 'succeeded' : 'failed';
}

interface ProcessOptions {
  readonly allowNeverStarted?: boolean;
}

/** An end decided from what was read, committed by the caller alone or with a page (docs/decisions/0431). */
interface PendingEnd {
  readonly attempt: AttemptRecord;
  readonly run: RunRecord;
  readonly status: RunTerminalStatus;
  readonly cause: CompletionCause;
  /** The authenticated receipt the end comes from (journaled for deletion in the same commit). */
  readonly receipt: CompletionReceipt | null;
  /** The receipt's finish on the store clock, read once where a cancel intent makes it matter. */
  readonly finishedOnStoreMs?: number;
}

type Verdict = { readonly outcome: CompletionOutcome } | { readonly end: PendingEnd };
type CommitResult = CompleteAttemptOutcome | { readonly error: unknown };

const ACTIVE: Verdict = { outcome: { kind: 'active' } };

function endOf(
  attempt: AttemptRecord,
  run: RunRecord,
  status: RunTerminalStatus,
  cause: CompletionCause,
  fromReceipt?: { readonly receipt: CompletionReceipt; readonly finishedOnStoreMs: number },
): Verdict {
  return {
    end: {
      attempt,
      run,
      status,
      cause,
      receipt: fromReceipt?.receipt ?? null,
      ...(fromReceipt === undefined ? {} : { finishedOnStoreMs: fromReceipt.finishedOnStoreMs }),
    },
  };
}

function commandOf(end: PendingEnd): CompleteAttemptCommand {
  const { attempt, status, cause, receipt } = end;
  return {
    runId: attempt.runId,
    attemptId: attempt.attemptId,
    status,
    cause,
    exit: receipt === null ? null : { exitCode: receipt.exitCode, signal: receipt.signal },
    attemptEventId: `evt-${randomUUID()}`,
    runEventId: `evt-${randomUUID()}`,
    journalReceipt: receipt !== null,
  };
}

/** Each attempt once, first mention first: a page commits an attempt's end once. */
function uniqueAttempts(refs: readonly AttemptRef[]): AttemptRef[] {
  const seen = new Map<string, AttemptRef>();
  for (const ref of refs) if (!seen.has(ref.attemptId)) seen.set(ref.attemptId, ref);
  return [...seen.values()];
}

export class CompletionProcessor {
  readonly #runStore: CompletionProcessorOptions['runStore'];
  readonly #store: ExecutionStore;
  readonly #directory: string;
  readonly #held: HeldGroups;
  readonly #observer: DispatchObserver;
  readonly #isAdmitting: (attemptId: string) => boolean;
  /** The handle of each attempt looked at, so its hold is released when it ends. */
  readonly #handles = new Map<string, string>();

  constructor(options: CompletionProcessorOptions) {
    this.#held = options.heldGroups ?? new HeldGroups();
    this.#runStore = options.runStore;
    this.#store = options.executionStore;
    this.#directory = options.receiptDirectory;
    this.#observer = observerOf(options.observer);
    this.#isAdmitting = options.isAdmitting ?? (() => false);
  }

  /**
   * Everything known about one attempt, converged as far as proof allows. `allowNeverStarted`: a
   * `claimed` attempt without intent may be ended (startup recovery only: nothing can be spawning).
   */
  async process(ref: AttemptRef, options: ProcessOptions = {}): Promise<CompletionOutcome> {
    const verdict = await this.#converge(ref, options);
    const outcome =
      'end' in verdict ? await this.#settle(verdict.end, await this.#commitOne(verdict.end)) : verdict.outcome;
    this.#afterOutcome(ref, outcome);
    return outcome;
  }

  /**
   * A page of attempts (docs/decisions/0431): each converged as `process` does, then every end the
   * page decided committed together, EXECUTION_PAGE_MAX to a transaction (on SQLite one synced
   * commit for them all), then each settled. `onOutcome` hears every attempt's outcome as soon as
   * it is known. A page the store refuses is committed again one end at a time, so a failure stays
   * its own attempt's: the others are settled and heard, then the first failure is thrown.
   */
  async processPage(
    refs: readonly AttemptRef[],
    onOutcome: (ref: AttemptRef, outcome: CompletionOutcome) => void,
    options: ProcessOptions = {},
  ): Promise<void> {
    const pending: Array<{ readonly ref: AttemptRef; readonly end: PendingEnd }> = [];
    for (const ref of uniqueAttempts(refs)) {
      const verdict = await this.#converge(ref, options);
      if ('end' in verdict) pending.push({ ref, end: verdict.end });
      else this.#heard(ref, verdict.outcome, onOutcome);
    }
    let failure: unknown = null;
    for (let start = 0; start < pending.length; start += EXECUTION_PAGE_MAX) {
      const page = pending.slice(start, start + EXECUTION_PAGE_MAX);
      const results = await this.#commitPage(page.map(({ end }) => end));
      for (const [i, { ref, end }] of page.entries()) {
        const result = results[i] as CommitResult;
        if ('error' in result) failure ??= result.error;
        else this.#heard(ref, await this.#settle(end, result), onOutcome);
      }
    }
    if (failure !== null) throw failure;
  }

  #heard(
    ref: AttemptRef,
    outcome: CompletionOutcome,
    onOutcome: (ref: AttemptRef, outcome: CompletionOutcome) => void,
  ): void {
    this.#afterOutcome(ref, outcome);
    onOutcome(ref, outcome);
  }

  #afterOutcome(ref: AttemptRef, outcome: CompletionOutcome): void {
    if (outcome.kind === 'completed' || outcome.kind === 'terminal' || outcome.kind === 'missing')
      this.#ended(ref, outcome.kind === 'completed');
  }

  /**
   * The attempt has ended: its group hold is released and, when this call committed the end, its
   * job cgroup is removed if empty (docs/decisions/0300). The launcher removes it too, but not when
   * it was killed first; a `keep` job's populated cgroup stays for the cleanup sweep.
   */
  #ended(ref: AttemptRef, committedNow: boolean): void {
    const handle = this.#handles.get(ref.attemptId);
    if (handle !== undefined) this.#held.release(handle);
    if (handle !== undefined && committedNow) removeEndedJobCgroup(handle);
    this.#handles.delete(ref.attemptId);
  }

  /** What is known of one attempt: an outcome, or an end to commit (nothing is written here but a quarantine or a late receipt's cleanup). */
  async #converge(ref: AttemptRef, options: ProcessOptions): Promise<Verdict> {
    // Asked before the read: an admission that ends after it has stored what it did before the read.
    const admitting = this.#isAdmitting(ref.attemptId);
    const attempt = await this.#runStore.getAttempt(ref.runId, ref.attemptId);
    const run = await this.#runStore.getRun(ref.runId);
    if (attempt === null || run === null) return { outcome: { kind: 'missing' } };
    if (attempt.handle !== null) this.#handles.set(attempt.attemptId, attempt.handle);
    const first = await this.#fromReceipt(attempt, run);
    if (first !== null) return first;
    if (isTerminal(attempt.status))
      return { outcome: { kind: 'terminal', status: attempt.status, lateReceipt: false } };

    if (attempt.status === 'claimed') {
      if (admitting) return ACTIVE;
      if (run.cancelRequestedAtMs === null && options.allowNeverStarted !== true) return ACTIVE;
      return endOf(attempt, run, neverStartedStatus(run), 'never_started');
    }
    if (attempt.status === 'starting' && attempt.handle === null) {
      // A job starts only after its handle is stored (docs/decisions/0310): unless this process is
      // still admitting it, none was started, and none can be now.
      if (admitting) return ACTIVE;
      return endOf(attempt, run, neverStartedStatus(run), 'never_started');
    }
    if (attempt.handle === null) return { outcome: { kind: 'unproven' } };
    // The launcher leads the job's group; its death is not the job's end (docs/decisions/0071):
    // the attempt ends without a receipt only once no member of the group is left.
    const liveness = groupLiveness(attempt.handle, this.#held);
    if (liveness !== 'gone') return liveness === 'alive' ? ACTIVE : { outcome: { kind: 'unproven' } };
    // The launcher is gone, so its receipt is final: read again before concluding.
    const second = await this.#fromReceipt(attempt, run);
    if (second !== null) return second;
    return run.cancelRequestedAtMs === null
      ? endOf(attempt, run, 'failed', 'lost')
      : endOf(attempt, run, cancelIntentStatus(run), 'stopped');
  }

  async #fromReceipt(attempt: AttemptRecord, run: RunRecord): Promise<Verdict | null> {
    const read = readReceipt(this.#directory, attempt.attemptId);
    if (read.kind === 'absent') return null;
    if (read.kind === 'malformed') return { outcome: await this.#quarantine(attempt, 'malformed') };
    const reason = await this.#authenticate(read.receipt, attempt);
    if (reason !== null) return { outcome: await this.#quarantine(attempt, reason) };
    if (isTerminal(attempt.status)) return { outcome: await this.#cleanLate(attempt, attempt.status) };
    const receipt = read.receipt;
    // Only a cancel intent makes the finish's time matter (and costs PostgreSQL a round trip).
    const finishedOnStoreMs =
      run.cancelRequestedAtMs === null ? receipt.finishedAtMs : await finishOnStoreClock(receipt, this.#store);
    return endOf(attempt, run, statusForReceipt(receipt, run, finishedOnStoreMs), 'receipt', {
      receipt,
      finishedOnStoreMs,
    });
  }

  async #authenticate(receipt: CompletionReceipt, attempt: AttemptRecord): Promise<QuarantineReason | null> {
    if (receipt.runId !== attempt.runId || receipt.attemptId !== attempt.attemptId) return 'identity';
    if (attempt.receiptTokenDigest === null) return 'token';
    const digest = receiptTokenDigest(receipt.token);
    if (!digestsEqual(digest, attempt.receiptTokenDigest)) return 'token';
    const owner = await this.#store.attemptByReceiptDigest(digest);
    if (owner === null || owner.runId !== attempt.runId || owner.attemptId !== attempt.attemptId) return 'token';
    // The same callback sequence, or (for a terminal attempt) the next one: nothing else.
    const maxSeq = isTerminal(attempt.status) ? RECEIPT_CALLBACK_SEQ + 1 : RECEIPT_CALLBACK_SEQ;
    if (receipt.seq < RECEIPT_CALLBACK_SEQ || receipt.seq > maxSeq) return 'sequence';
    return receiptTimesImpossible(receipt, attempt.createdAtMs, this.#store) ? 'time' : null;
  }

  #commitOne(end: PendingEnd): Promise<CompleteAttemptOutcome> {
    return this.#store.completeAttempt(commandOf(end));
  }

  /** One transaction for the page; refused, then one end at a time, each failure kept as its own. */
  async #commitPage(ends: readonly PendingEnd[]): Promise<CommitResult[]> {
    if (ends.length > 1) {
      const together = await this.#store.completeAttempts(ends.map(commandOf)).catch(() => null);
      if (together !== null) return together;
    }
    const results: CommitResult[] = [];
    for (const end of ends) results.push(await this.#commitOne(end).catch((error: unknown) => ({ error })));
    return results;
  }

  /** What the commit means: the outcome, the receipt's cleanup after it, the cancel's time observed. */
  async #settle(end: PendingEnd, result: CompleteAttemptOutcome): Promise<CompletionOutcome> {
    const { attempt, run, cause, receipt } = end;
    if (result.kind === 'missing') return { kind: 'missing' };
    const current = result.attempt.status;
    // What the CAS wrote: a never-started end takes a cancel intent that came after the read (docs/decisions/0440).
    const status = isTerminal(current) ? current : end.status;
    if (result.kind === 'already_terminal') {
      return receipt === null ? { kind: 'terminal', status, lateReceipt: false } : this.#cleanLate(attempt, status);
    }
    if ((status === 'cancelled' || status === 'timed_out') && run.cancelRequestedAtMs !== null) {
      // The receipt's finish on the store clock when there is one, else the store's now; clamped at
      // 0 for a store clock (PostgreSQL's) that runs ahead of this host.
      const endedAtMs = end.finishedOnStoreMs ?? (await this.#storeNow());
      this.#observer.onCancelToExit(Math.max(0, endedAtMs - run.cancelRequestedAtMs) / 1_000);
    }
    if (receipt !== null) {
      deleteReceipt(this.#directory, attempt.attemptId);
      await this.#store.closeJournalEntry({ attemptId: attempt.attemptId, action: 'delete' });
    }
    const exit = receipt === null ? null : { exitCode: receipt.exitCode, signal: receipt.signal };
    return {
      kind: 'completed',
      status,
      cause,
      exitCode: exit?.exitCode ?? null,
      signal: exit?.signal ?? null,
      startFailure: receipt?.spawnFailed === true ? startFailureOfStatus(receipt.exitCode) : null,
    };
  }

  /** The store's now: its boot-anchored clock (SQLite), its own (PostgreSQL), else the wall clock (no addon). */
  async #storeNow(): Promise<number> {
    const now = bootNow();
    const anchored = now === null ? null : (this.#store.storeTimeOfBoot?.(now.bootId, now.bootMs) ?? null);
    return anchored ?? (await this.#store.storeNowMs?.()) ?? Date.now();
  }

  /** Intent first (a journal row), then the move, then the row is closed. */
  async #quarantine(attempt: AttemptRecord, reason: QuarantineReason): Promise<CompletionOutcome> {
    await this.#store.recordQuarantineIntent({ runId: attempt.runId, attemptId: attempt.attemptId, reason });
    quarantineReceipt(this.#directory, attempt.attemptId);
    await this.#store.closeJournalEntry({ attemptId: attempt.attemptId, action: 'quarantine' });
    return { kind: 'quarantined', reason };
  }

  async #cleanLate(attempt: AttemptRecord, status: RunTerminalStatus): Promise<CompletionOutcome> {
    await this.#store.recordReceiptDeletion({ runId: attempt.runId, attemptId: attempt.attemptId });
    deleteReceipt(this.#directory, attempt.attemptId);
    await this.#store.closeJournalEntry({ attemptId: attempt.attemptId, action: 'delete' });
    return { kind: 'terminal', status, lateReceipt: true };
  }
}
