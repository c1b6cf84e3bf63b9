// What this replica saw of each worker session's lease pages (docs/decisions/0204): the leases it
// named and when, on the monotonic clock, and when it last looked for the leases a page did not name
// (docs/decisions/0434). The metrics read it per session at scrape time. A session
// id is a random name of one registration (no identity, token or secret); the set is bounded: a
// session not seen for SESSION_FORGET_MS is dropped, and at most SESSIONS_MAX are kept.
export const SESSIONS_MAX = 1_024;
const SESSION_FORGET_MS = 60_000;

export interface SessionSample {
  readonly session: string;
  readonly leases: number;
  readonly tickAgeSeconds: number;
}

export class SessionActivity {
  readonly #seen = new Map<string, { leases: number; atMs: number }>();
  /** When this replica last looked for each session's unnamed leases; bounded as `#seen`. */
  readonly #looked = new Map<string, number>();
  readonly #lookEveryMs: number;

  /** `lookEveryMs`: how often a session's unnamed leases are looked for here (one worker lease). */
  constructor(lookEveryMs: number) {
    this.#lookEveryMs = lookEveryMs;
  }

  /**
   * Whether this page should look for the session's leases it did not name: at its first page here,
   * then once per worker lease. A true answer counts as the look.
   */
  unnamedLookDue(sessionId: string): boolean {
    const now = performance.now();
    const last = this.#looked.get(sessionId);
    if (last !== undefined && now - last < this.#lookEveryMs) return false;
    this.#looked.delete(sessionId);
    this.#looked.set(sessionId, now);
    if (this.#looked.size > SESSIONS_MAX) this.#looked.delete(this.#looked.keys().next().value as string);
    return true;
  }

  seen(sessionId: string, leases: number): void {
    this.#seen.delete(sessionId);
    this.#seen.set(sessionId, { leases, atMs: performance.now() });
    if (this.#seen.size > SESSIONS_MAX) this.#seen.delete(this.#seen.keys().next().value as string);
  }

  /** The sessions seen recently, with the time since each one's last page here. */
  samples(): SessionSample[] {
    const now = performance.now();
    const samples: SessionSample[] = [];
    for (const [session, { leases, atMs }] of this.#seen) {
      if (now - atMs > SESSION_FORGET_MS) this.#seen.delete(session);
      else samples.push({ session, leases, tickAgeSeconds: (now - atMs) / 1_000 });
    }
    return samples;
  }
}
