// Stops pushed to a waiting worker (docs/decisions/0201): one LISTEN connection per replica on the
// channel migration 0016's trigger notifies at every committed cancel intent. A worker's lease page
// that has nothing but renewals waits here, up to the wait it asked for, for a cancel of one of its
// runs; the wake-up is only a hint to run the page again, which decides from the database. When the
// connection is lost every waiter is woken (each re-reads), and the connection is made again with
// a growing pause: the periodic page of the worker's next request is the fallback.
import { Client } from 'pg';

import { cancelWakeupRunId, listenForCancelWakeups } from '../store/postgres/index';

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;

type Waiter = () => void;

/** A watch on some runs' cancels, begun before their page was read. */
export interface CancelWatch {
  woken(ms: number): Promise<boolean>;
  close(): void;
}

export class CancelWakeups {
  readonly #databaseUrl: string;
  readonly #waiters = new Map<string, Set<Waiter>>();
  #client: Client | null = null;
  #closed = false;
  #pauseMs = RECONNECT_MIN_MS;
  #retry: NodeJS.Timeout | undefined;

  constructor(databaseUrl: string) {
    this.#databaseUrl = databaseUrl;
  }

  /** Connects and listens; a failure here is retried in the background (waits then time out). */
  start(): void {
    void this.#connect();
  }

  /** Whether the listener is connected now (a status fact; waiting works either way). */
  listening(): boolean {
    return this.#client !== null;
  }

  /**
   * Watches for a committed cancel of one of `runIds` from now on. Taken before the page reads its
   * leases (docs/decisions/0438): a cancel committed between that read and the wait is then caught,
   * where a wait begun after the read missed its NOTIFY and ran out. Closed by `woken`, or by
   * `close` when the page is answered without waiting.
   */
  watch(runIds: readonly string[]): CancelWatch {
    let woken = false;
    let settle: ((woken: boolean) => void) | null = null;
    let timer: NodeJS.Timeout | undefined;
    const waiter: Waiter = () => {
      woken = true;
      settle?.(true);
    };
    for (const runId of runIds) {
      let set = this.#waiters.get(runId);
      if (set === undefined) this.#waiters.set(runId, (set = new Set()));
      set.add(waiter);
    }
    const close = (): void => {
      clearTimeout(timer);
      for (const runId of runIds) this.#remove(runId, waiter);
    };
    return {
      close,
      // True when a cancel of one of the runs was committed since the watch began (or the listener
      // was lost: each page re-reads), false after `ms` or once closed.
      woken: (ms) => {
        if (woken || this.#closed || runIds.length === 0 || ms <= 0) {
          close();
          return Promise.resolve(woken);
        }
        return new Promise((resolve) => {
          settle = (value) => {
            close();
            resolve(value);
          };
          timer = setTimeout(() => settle?.(false), ms);
        });
      },
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#wakeAll();
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new Client({
      connectionString: this.#databaseUrl,
      connectionTimeoutMillis: 3_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
    });
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (message) => {
      const runId = cancelWakeupRunId(message);
      if (runId !== null) this.#wake(runId);
    });
    try {
      await client.connect();
      await listenForCancelWakeups(client);
      if (this.#closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.#client = client;
      this.#pauseMs = RECONNECT_MIN_MS;
      // A cancel committed while no one listened: everyone re-reads once.
      this.#wakeAll();
    } catch {
      this.#lost(client);
    }
  }

  #lost(client: Client): void {
    if (this.#client === client) this.#client = null;
    client.removeAllListeners('notification');
    void client.end().catch(() => undefined);
    this.#wakeAll();
    if (this.#closed || this.#retry !== undefined) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      void this.#connect();
    }, this.#pauseMs);
    this.#retry.unref();
    this.#pauseMs = Math.min(RECONNECT_MAX_MS, this.#pauseMs * 2);
  }

  #wake(runId: string): void {
    for (const waiter of [...(this.#waiters.get(runId) ?? [])]) waiter();
  }

  #wakeAll(): void {
    for (const set of [...this.#waiters.values()]) for (const waiter of [...set]) waiter();
  }

  #remove(runId: string, waiter: Waiter): void {
    const set = this.#waiters.get(runId);
    if (set === undefined) return;
    set.delete(waiter);
    if (set.size === 0) this.#waiters.delete(runId);
  }
}
