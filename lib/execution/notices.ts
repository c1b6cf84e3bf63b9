// Completion notices (design/execution §2): when a launcher exits, only its attempt identity reaches the
// composition root, coalesced in a bounded in-process set. Not a durable fact: a lost notice is
// made up for by the periodic active-attempt page and by startup recovery.
export const NOTICES_MAX = 64;

export interface AttemptRef {
  readonly runId: string;
  readonly attemptId: string;
}

export class CompletionNotices {
  readonly #pending = new Map<string, AttemptRef>();
  #dropped = 0;
  #onNotice: (() => void) | null = null;

  /** Called after a notice was added (the lifecycle pulls its one timer forward). */
  set onNotice(callback: (() => void) | null) {
    this.#onNotice = callback;
  }

  /** false: already pending (coalesced) or the set is full (dropped; the page converges it). */
  add(ref: AttemptRef): boolean {
    const key = `${ref.runId}\n${ref.attemptId}`;
    if (this.#pending.has(key)) return false;
    if (this.#pending.size >= NOTICES_MAX) {
      this.#dropped += 1;
      return false;
    }
    this.#pending.set(key, { runId: ref.runId, attemptId: ref.attemptId });
    this.#onNotice?.();
    return true;
  }

  /** Takes every pending identity once. */
  take(): AttemptRef[] {
    const refs = [...this.#pending.values()];
    this.#pending.clear();
    return refs;
  }

  get size(): number {
    return this.#pending.size;
  }

  get dropped(): number {
    return this.#dropped;
  }
}
