// The worker's view of the control-plane replicas (docs/decisions/0202): requests go round the
// replicas; one that failed to answer (refused, reset, or silent past the request's timeout) is
// skipped for REPLICA_REST_MS while another one is left, so a silent replica costs one timeout,
// not one per call. When every replica is resting, all are tried again in turn.
import { ControlPlaneClient, type ClientReply, type ClientTls } from './client';

export const REPLICA_REST_MS = 15_000;

interface Replica {
  readonly client: ControlPlaneClient;
  restUntil: number;
}

export class ReplicaSet {
  readonly #replicas: Replica[];
  #turn = 0;

  constructor(urls: readonly string[], tls: ClientTls) {
    this.#replicas = urls.map((url) => ({ client: new ControlPlaneClient(url, tls), restUntil: 0 }));
  }

  /** POSTs to the next healthy replica; on a network failure, to the next one, each replica at most once. */
  async post<T>(path: string, body: unknown, timeoutMs?: number): Promise<ClientReply<T>> {
    let lastError: unknown;
    for (const replica of this.#order()) {
      try {
        const reply = await replica.client.send<T>('POST', path, body, timeoutMs);
        replica.restUntil = 0;
        return reply;
      } catch (error) {
        replica.restUntil = performance.now() + REPLICA_REST_MS;
        lastError = error;
      }
    }
    throw lastError;
  }

  /** How many replicas are resting after a failure (an observation, no authority). */
  resting(): number {
    const now = performance.now();
    return this.#replicas.filter((replica) => replica.restUntil > now).length;
  }

  reload(tls: ClientTls): void {
    for (const replica of this.#replicas) replica.client.reload(tls);
  }

  close(): void {
    for (const replica of this.#replicas) replica.client.close();
  }

  /** Healthy replicas first, from the next turn; resting ones last (they may have recovered). */
  #order(): Replica[] {
    const start = this.#turn++ % this.#replicas.length;
    const rotated = [...this.#replicas.slice(start), ...this.#replicas.slice(0, start)];
    const now = performance.now();
    return [...rotated.filter((r) => r.restUntil <= now), ...rotated.filter((r) => r.restUntil > now)];
  }
}
