// The worker's view of the control-plane replicas (docs/decisions/0202, 0396): requests go round
// the replicas; one that failed to answer (refused, reset, or silent past its handshake or the
// request's timeout) gets no request until it has answered a probe of /health, tried in the
// background once per rest, while another one is left. A silent replica thus costs one handshake
// bound, once. When every replica has failed, all are tried again in turn.
import { ControlPlaneClient, HANDSHAKE_TIMEOUT_MS, type ClientReply, type ClientTls } from './client';

export const REPLICA_REST_MS = 15_000;
/** A probe that takes longer than this finds the replica still unwell. */
export const REPLICA_PROBE_TIMEOUT_MS = 2_000;

export interface ReplicaSetOptions {
  /** How long a failed replica waits before its next probe (default REPLICA_REST_MS). */
  readonly restMs?: number;
}

interface Replica {
  readonly client: ControlPlaneClient;
  /** Failed, and not yet answered a probe since. */
  failed: boolean;
  /** When the next probe of a failed replica may start (monotonic ms). */
  restUntil: number;
  probing: boolean;
}

export class ReplicaSet {
  readonly #replicas: Replica[];
  readonly #restMs: number;
  #turn = 0;

  constructor(urls: readonly string[], tls: ClientTls, options: ReplicaSetOptions = {}) {
    this.#replicas = urls.map((url) => ({
      client: new ControlPlaneClient(url, tls),
      failed: false,
      restUntil: 0,
      probing: false,
    }));
    this.#restMs = options.restMs ?? REPLICA_REST_MS;
  }

  /**
   * POSTs to the next healthy replica, its handshake bounded; on a network failure, to the next one.
   * When none answered, those whose bounded handshake ran out and the failed ones are tried once more
   * with the request's whole timeout: an overloaded control plane that is slow to shake hands is
   * still reached (docs/decisions/0396).
   */
  async post<T>(path: string, body: unknown, timeoutMs?: number): Promise<ClientReply<T>> {
    let lastError: unknown;
    const unbounded: Replica[] = [];
    for (const replica of this.#order()) {
      if (replica.failed) {
        unbounded.push(replica);
        continue;
      }
      try {
        return await replica.client.send<T>('POST', path, body, timeoutMs, HANDSHAKE_TIMEOUT_MS);
      } catch (error) {
        this.#rest(replica);
        lastError = error;
        if ((error as { errno?: unknown }).errno === 'timeout') unbounded.push(replica);
      }
    }
    for (const replica of unbounded) {
      try {
        const reply = await replica.client.send<T>('POST', path, body, timeoutMs);
        replica.failed = false;
        return reply;
      } catch (error) {
        this.#rest(replica);
        lastError = error;
      }
    }
    throw lastError;
  }

  /** How many replicas failed and have not answered a probe since (an observation, no authority). */
  resting(): number {
    return this.#replicas.filter((replica) => replica.failed).length;
  }

  reload(tls: ClientTls): void {
    for (const replica of this.#replicas) replica.client.reload(tls);
  }

  close(): void {
    for (const replica of this.#replicas) replica.client.close();
  }

  #rest(replica: Replica): void {
    replica.failed = true;
    replica.restUntil = performance.now() + this.#restMs;
  }

  /** One probe at a time per replica; only an answer of /health brings it back. */
  #probe(replica: Replica): void {
    replica.probing = true;
    void replica.client
      .send('GET', '/health', undefined, REPLICA_PROBE_TIMEOUT_MS)
      .then(
        (reply) => (reply.status === 200 ? (replica.failed = false) : this.#rest(replica)),
        () => this.#rest(replica),
      )
      .finally(() => (replica.probing = false));
  }

  /** Healthy replicas first, from the next turn; failed ones last (a fallback), each probed once its rest is over. */
  #order(): Replica[] {
    const start = this.#turn++ % this.#replicas.length;
    const rotated = [...this.#replicas.slice(start), ...this.#replicas.slice(0, start)];
    const now = performance.now();
    for (const replica of rotated)
      if (replica.failed && !replica.probing && replica.restUntil <= now) this.#probe(replica);
    return [...rotated.filter((r) => !r.failed), ...rotated.filter((r) => r.failed)];
  }
}
