// The process groups a runner holds (docs/decisions/0071): one verified pidfd per running attempt,
// taken while its launcher (the group leader) is proved alive and kept until the attempt ends. A
// held pidfd pins the leader's kernel pid, so the group it names is the job's group even after the
// launcher died, and a group stop through it can never reach a group that reused the number.
import { acquireGroupHold, type GroupHold, type GroupSignalOutcome } from '../native/index';
import { handleExpectedIdentity, parseHandle } from './durable-handle';
import { pidNamespaceMatches } from './pid-namespace';

export type HoldResult = 'held' | 'leader_gone' | 'unavailable';

export class HeldGroups {
  readonly #holds = new Map<string, GroupHold>();

  get size(): number {
    return this.#holds.size;
  }

  /** Holds the group a durable handle names, if its leader is proved alive now; idempotent. */
  hold(handle: string): HoldResult {
    if (this.#holds.has(handle)) return 'held';
    let expected;
    try {
      const parsed = parseHandle(handle);
      if (!pidNamespaceMatches(parsed.pidNs)) return 'unavailable';
      expected = handleExpectedIdentity(parsed);
    } catch {
      return 'unavailable';
    }
    const acquired = acquireGroupHold(expected);
    if (acquired.kind === 'held') {
      this.#holds.set(handle, acquired.hold);
      return 'held';
    }
    return acquired.kind === 'already_exited' ? 'leader_gone' : 'unavailable';
  }

  get(handle: string): GroupHold | null {
    return this.#holds.get(handle) ?? null;
  }

  /** Signal 0 through the held pidfd: `already_exited` once no member of the group is left. */
  probe(handle: string): GroupSignalOutcome | null {
    return this.#holds.get(handle)?.signalGroup(0) ?? null;
  }

  release(handle: string): void {
    this.#holds.get(handle)?.release();
    this.#holds.delete(handle);
  }

  releaseAll(): void {
    for (const hold of this.#holds.values()) hold.release();
    this.#holds.clear();
  }
}
