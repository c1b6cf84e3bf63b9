// The SQLite store's time authority (design/dispatch §2.2, docs/decisions/0160): by default the boot
// clock anchored once per boot in the store itself, so every process of one boot reads the same
// now, a wall-clock step moves no deadline, lease or backoff, and a new boot never reads a time
// earlier than one the store holds (an old boot's leases and retry waits are then due at once).
// A test or a device may still inject its own clock; every reading is validated so a broken clock
// fails loudly instead of writing nonsense deadlines.
import { PidfenceError } from '../../base/errors';
import { EPOCH_MS_MAX } from '../../contract/index';
import { bootNow, type BootReading } from '../../native/index';
import type { SqliteDatabase } from './database';
import { CLOCK_SQL } from './clock-statements';
import { driverOf, type SqliteDriver } from './driver';

export type Clock = () => number;

export function readClock(clock: Clock): number {
  const now = clock();
  if (!Number.isInteger(now) || now < 0 || now > EPOCH_MS_MAX) {
    throw new PidfenceError(
      'the store clock returned something other than integer epoch milliseconds; inject a clock like () => Date.now().',
      'ERR_PIDFENCE_BAD_CLOCK',
    );
  }
  return now;
}

function isMissingTable(error: unknown): boolean {
  return error instanceof Error && /no such table: store_clock_anchors/.test(error.message);
}

/** The boot-anchored clock of one connection: store ms = boot ms + the boot's offset. */
export class BootAnchoredClock {
  readonly #database: SqliteDriver;
  readonly #boot: () => BootReading | null;
  readonly #wall: () => number;
  /** The offset of this process's boot, once read or written (the boot cannot change under us). */
  #offset: { readonly bootId: string; readonly offsetMs: number } | undefined;

  constructor(
    database: SqliteDatabase,
    options: { readonly boot?: () => BootReading | null; readonly wall?: () => number } = {},
  ) {
    this.#database = driverOf(database);
    this.#boot = options.boot ?? bootNow;
    this.#wall = options.wall ?? Date.now;
  }

  /**
   * Now on the store clock. Without the addon (no boot clock) or before migration 0010 it is the
   * wall clock, as it was before docs/decisions/0160.
   */
  now(): number {
    const reading = this.#boot();
    if (reading === null) return this.#wall();
    const offsetMs = this.#offsetOf(reading);
    return offsetMs === null ? this.#wall() : reading.bootMs + offsetMs;
  }

  /** A boot-clock reading of any boot the store has an anchor for, as store time; null when it has none. */
  storeTimeOf(bootId: string, bootMs: number): number | null {
    if (this.#offset?.bootId === bootId) return bootMs + this.#offset.offsetMs;
    try {
      const row = this.#database.prepare<[string], { offset: number }>(CLOCK_SQL.offset).get(bootId);
      return row === undefined ? null : bootMs + row.offset;
    } catch (error) {
      if (isMissingTable(error)) return null;
      throw error;
    }
  }

  /** Reads (or, first in this boot, writes) the anchor; cheap after the first call. */
  prepare(): void {
    const reading = this.#boot();
    if (reading !== null) this.#offsetOf(reading);
  }

  #offsetOf(reading: BootReading): number | null {
    if (this.#offset?.bootId === reading.bootId) return this.#offset.offsetMs;
    // A read-only store (docs/decisions/0226) cannot write an anchor: without one for this boot, the wall clock.
    if (this.#database.readonly) return this.storeTimeOf(reading.bootId, 0);
    let offsetMs: number;
    try {
      offsetMs = this.#database.inTransaction
        ? this.#anchor(reading)
        : this.#database.transaction(() => this.#anchor(reading)).immediate();
    } catch (error) {
      if (isMissingTable(error)) return null;
      throw error;
    }
    this.#offset = { bootId: reading.bootId, offsetMs };
    return offsetMs;
  }

  /** Under the write lock: the boot's anchor, written by the first process of the boot to ask. */
  #anchor(reading: BootReading): number {
    const found = this.#database.prepare<[string], { offset: number }>(CLOCK_SQL.offset).get(reading.bootId);
    if (found !== undefined) return found.offset;
    const wallMs = readClock(this.#wall);
    const high = this.#database.prepare<[], { high: number | null }>(CLOCK_SQL.highWater).get()?.high ?? null;
    const anchorWallMs = high === null ? wallMs : Math.max(wallMs, high + 1);
    this.#database.prepare(CLOCK_SQL.insertAnchor).run(reading.bootId, anchorWallMs, reading.bootMs, wallMs);
    return anchorWallMs - reading.bootMs;
  }
}

const clocks = new WeakMap<SqliteDatabase, BootAnchoredClock>();

/** The one boot-anchored clock of a connection (shared by every store class on it). */
export function storeClockOf(database: SqliteDatabase): BootAnchoredClock {
  let clock = clocks.get(database);
  if (clock === undefined) {
    clock = new BootAnchoredClock(database);
    clocks.set(database, clock);
  }
  return clock;
}
