// The control plane's hold on its workers (docs/decisions/0240, 0241, 0244): the deny list and the
// cordon read on every worker request, a worker's announcement, and the operator's acts and view
// behind the worker permissions on `@cluster`. It never touches the lease-control SQL: a drain asks
// each held run to stop through the run's durable cancel intent, which the next tick delivers.
import { randomUUID } from 'node:crypto';

import type { Pool } from 'pg';

import { PidfenceError } from '../base/errors';
import {
  CLUSTER_SCOPE,
  validateWorkerAction,
  validateWorkerAnnouncement,
  validateWorkerName,
  type FleetRefusal,
  type Permission,
  type WorkerActionOutcome,
  type WorkerFleet,
  type WorkerHold,
} from '../contract/index';
import { auditActor, authorize, principalOf } from '../management/index';
import {
  PostgresFleetStore,
  readLastForgetAudit,
  readWorkerFleet,
  type PostgresManagementStore,
  type PostgresRunStore,
} from '../store/postgres/index';

export interface FleetObserver {
  onRefusal(reason: FleetRefusal): void;
}

/** The refusal a revoked name gets on every request (docs/decisions/0240). */
export class WorkerRevokedError extends PidfenceError {
  constructor(name: string) {
    super(
      `${name} is revoked on this cluster: an operator ran \`pidfence worker revoke ${name}\`; nothing it asks is served until \`pidfence worker reinstate ${name}\`.`,
      'ERR_PIDFENCE_WORKER_REVOKED',
    );
  }
}

/** Ends a forgotten worker's runs (the lease store's forgetWorker); null when no such worker is known. */
export type Forgetter = (
  name: string,
  actor: string,
) => Promise<{ readonly runsForgotten: number; readonly sessionsEnded: number } | null>;

function workerNotFound(name: string): PidfenceError {
  return new PidfenceError(
    `no worker named ${name} has registered with this cluster; check the name with \`pidfence workers\` (it is the subject CN of the worker's certificate).`,
    'ERR_PIDFENCE_WORKER_NOT_FOUND',
  );
}

export class FleetControl {
  readonly #pool: Pool;
  readonly #store: PostgresFleetStore;
  readonly #management: PostgresManagementStore;
  readonly #runStore: PostgresRunStore;
  readonly #observer: FleetObserver | undefined;

  readonly #forget: Forgetter | undefined;

  constructor(
    pool: Pool,
    management: PostgresManagementStore,
    runStore: PostgresRunStore,
    observer?: FleetObserver,
    forget?: Forgetter,
  ) {
    this.#pool = pool;
    this.#forget = forget;
    this.#store = new PostgresFleetStore(pool);
    this.#management = management;
    this.#runStore = runStore;
    this.#observer = observer;
  }

  /** Counts a refusal; an observer that throws changes nothing. */
  refused(reason: FleetRefusal): void {
    try {
      this.#observer?.onRefusal(reason);
    } catch {
      // observation only
    }
  }

  /** Every request: a revoked name is refused (one read, no write), else its hold is answered. */
  async admit(name: string): Promise<WorkerHold> {
    const hold = await this.#store.hold(name);
    if (hold.revoked) {
      this.refused('revoked');
      throw new WorkerRevokedError(name);
    }
    return hold;
  }

  /**
   * A pull from a cordoned or draining worker hands out nothing; it still counts as the worker's
   * heartbeat, as a pull does. Null: the worker takes work, so the pull goes ahead.
   */
  async holdBackPull(
    name: string,
    sessionId: string,
    hold: WorkerHold,
  ): Promise<{ readonly kind: 'none' | 'session_closed' } | null> {
    if (hold.admission === 'active') return null;
    this.refused('cordoned');
    return { kind: (await this.#store.touchSession(name, sessionId)) ? 'none' : 'session_closed' };
  }

  /** A completion counts only from the name that registered its session (another certificate replaying it is `lost`). */
  ownsSession(name: string, sessionId: string): Promise<boolean> {
    return this.#store.ownsSession(name, sessionId);
  }

  announce(name: string, body: unknown): Promise<WorkerHold> {
    return this.#store.announce(validateWorkerName(name), validateWorkerAnnouncement(body));
  }

  /**
   * After a pull handed `runId` to `name`: a drain that committed while the pull ran did not see this
   * lease, so ask its stop here. The read waits for an act in flight on the worker's row, so either
   * the drain saw the lease or this read sees the drain.
   */
  async afterAssignment(name: string, runId: string): Promise<void> {
    const hold = await this.#store.holdAfterActs(name);
    if (hold.admission === 'draining') await this.#requestStop(runId);
  }

  /** `pidfence workers`: needs worker.read on @cluster. */
  async list(subject: string): Promise<WorkerFleet> {
    await this.#authorize(subject, 'worker.read');
    return readWorkerFleet(this.#pool);
  }

  /** cordon, drain, uncordon, revoke, reinstate: needs worker.manage on @cluster; audited, idempotent. */
  async act(subject: string, nameText: string, actionText: string): Promise<WorkerActionOutcome> {
    const name = validateWorkerName(nameText);
    const action = validateWorkerAction(actionText);
    const principal = await this.#authorize(subject, 'worker.manage');
    if (action === 'forget') return this.#forgetWorker(name, auditActor(principal));
    const result = await this.#store.act(name, action, auditActor(principal));
    if (result.kind === 'not_found') throw workerNotFound(name);
    if (action !== 'drain') return result.outcome;
    let stopsRequested = 0;
    for (const runId of result.heldRuns) stopsRequested += (await this.#requestStop(runId)) ? 1 : 0;
    return { ...result.outcome, stopsRequested };
  }

  /** The lease store ends the runs; the hold is untouched and read back for the answer. */
  async #forgetWorker(name: string, actor: string): Promise<WorkerActionOutcome> {
    const forgotten = this.#forget === undefined ? null : await this.#forget(name, actor);
    if (forgotten === null) throw workerNotFound(name);
    const view = (await readWorkerFleet(this.#pool)).workers.find((worker) => worker.name === name);
    const audit = await readLastForgetAudit(this.#pool, name);
    return {
      name,
      action: 'forget',
      outcome: audit?.outcome ?? 'unchanged',
      state: view?.state ?? 'active',
      revision: Number(audit?.revision ?? 0),
      runsForgotten: forgotten.runsForgotten,
      sessionsEnded: forgotten.sessionsEnded,
    };
  }

  async #authorize(subject: string, permission: Permission): Promise<ReturnType<typeof principalOf>> {
    const principal = principalOf(subject);
    await authorize(this.#management, principal, CLUSTER_SCOPE, permission);
    return principal;
  }

  /** A drained worker's run ends through its own durable cancel intent (reason shutdown); an earlier intent is kept. */
  async #requestStop(runId: string): Promise<boolean> {
    const outcome = await this.#runStore.requestCancellation({
      runId,
      reason: 'shutdown',
      eventId: `evt-${randomUUID()}`,
    });
    return outcome.kind === 'requested';
  }
}
