// The receipts' time check and a receipt's finish on the store clock (docs/decisions/0161). A v2
// receipt carries boot-clock readings (bootId, startedBootMs, finishedBootMs): those are compared,
// within their boot, and mapped onto the store clock where the store is anchored to the boot clock.
// Wall readings (a v1 receipt, `*AtMs`) move with every NTP step, so they never quarantine a receipt:
// its token is what authenticates it.
import { bootNow, type BootReading } from '../native/index';
import type { ExecutionStore } from '../store/execution-store';
import { RECEIPT_CLOCK_SKEW_MS } from './receipts';

/** The time fields of any receipt version; the boot fields exist from v2 on. */
export interface ReceiptTimes {
  readonly startedAtMs: number;
  readonly finishedAtMs: number;
  readonly bootId?: string | null;
  readonly startedBootMs?: number;
  readonly finishedBootMs?: number;
}

type StoreTime = Pick<ExecutionStore, 'storeTimeOfBoot' | 'storeNowMs'>;

interface BootTimes {
  readonly bootId: string;
  readonly startedBootMs: number;
  readonly finishedBootMs: number;
}

function bootTimesOf(receipt: ReceiptTimes): BootTimes | null {
  const { bootId, startedBootMs, finishedBootMs } = receipt;
  if (typeof bootId !== 'string' || typeof startedBootMs !== 'number' || typeof finishedBootMs !== 'number')
    return null;
  return { bootId, startedBootMs, finishedBootMs };
}

/**
 * True when the receipt's times cannot be: it finished before it started, after now, or started
 * before its attempt was created, each judged on the boot clock of the boot that wrote it.
 * Another boot's receipt is judged only on its own order; a v1 receipt not at all.
 */
export function receiptTimesImpossible(
  receipt: ReceiptTimes,
  attemptCreatedAtMs: number,
  store: StoreTime,
  now: BootReading | null = bootNow(),
): boolean {
  const boot = bootTimesOf(receipt);
  if (boot === null) return false;
  if (boot.finishedBootMs < boot.startedBootMs) return true;
  if (now === null || now.bootId !== boot.bootId) return false;
  if (boot.finishedBootMs > now.bootMs + RECEIPT_CLOCK_SKEW_MS) return true;
  const startedOnStore = store.storeTimeOfBoot?.(boot.bootId, boot.startedBootMs) ?? null;
  return startedOnStore !== null && startedOnStore < attemptCreatedAtMs - RECEIPT_CLOCK_SKEW_MS;
}

/**
 * When the job finished, on the store's clock (what `cancel_requested_at_ms` is written with): the
 * boot-clock finish mapped through the store's anchor (SQLite); on a store with its own clock
 * (PostgreSQL), a finish of this boot placed as far before the store's now as it lies before this
 * host's boot clock now (docs/decisions/0190: no wall reading, so a step of this host's clock or
 * of the launcher's moves nothing); else the wall finish moved by how far the store clock and this
 * host's wall clock are apart now (zero until the wall clock steps), or as it is.
 */
export async function finishOnStoreClock(
  receipt: ReceiptTimes,
  store: StoreTime,
  bootNowOf: () => BootReading | null = bootNow,
  wallNowMs: number = Date.now(),
): Promise<number> {
  const boot = bootTimesOf(receipt);
  const mapped = boot === null ? null : (store.storeTimeOfBoot?.(boot.bootId, boot.finishedBootMs) ?? null);
  if (mapped !== null) return mapped;
  if (boot !== null && store.storeNowMs !== undefined) {
    // The store first, then the boot clock: the round trip makes the finish look earlier, never later.
    const storeNowMs = await store.storeNowMs();
    const now = bootNowOf();
    if (now !== null && now.bootId === boot.bootId) return storeNowMs - Math.max(0, now.bootMs - boot.finishedBootMs);
  }
  const now = bootNowOf();
  const storeNow = now === null ? null : (store.storeTimeOfBoot?.(now.bootId, now.bootMs) ?? null);
  return storeNow === null ? receipt.finishedAtMs : receipt.finishedAtMs + (storeNow - wallNowMs);
}
