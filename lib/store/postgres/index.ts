// pidfence/postgres: the cluster store (design/architecture §7, design/postgres): migrations by the owner role, the
// runtime grants, catalog readiness, and the dispatch repository and run store on the caller's
// pg.Pool or a pool made from a connection string. Never loaded by the root or edge entries.
import { assertPeerInstalled } from '../../base/optional-peers';

// `pg` is an optional peer dependency (docs/decisions/0080): say how to get it before the imports
// below fail with a bare "Cannot find module 'pg'". Compiled to CommonJS, this runs first.
assertPeerInstalled('pg', 'pidfence/postgres');

import { poolFor, type PostgresTarget } from './connection';
import { PostgresDispatchRepository } from './dispatch-repository';
import { PostgresExecutionStore } from './execution-store';
import { PostgresManagementStore, sessionUserOf } from './management-store';
import { PostgresRunnerStore } from './runner-store';
import { postgresReadiness, type PostgresReadiness } from './readiness';
import { PostgresRunStore } from './run-store';

export { PostgresDispatchRepository } from './dispatch-repository';
export type { PostgresRepositoryOptions } from './dispatch-repository';
export { PostgresRunStore } from './run-store';
export { PostgresExecutionStore } from './execution-store';
export { PostgresRunnerStore } from './runner-store';
export { PostgresFleetStore, readLastForgetAudit, readWorkerFleet, DRAIN_RUNS_MAX } from './fleet-store';
export type { WorkerActResult } from './fleet-store';
// The cluster's cancel wake-ups (docs/decisions/0201), sessions, waiting jobs and run-dispatch leases
// (docs/decisions/0100, 0380).
export { cancelWakeupRunId, listenForCancelWakeups } from './cancel-wakeup';
export { ClusterLeaseStore, REAP_PAGE, validateCompletionPage } from './cluster-lease-store';
export type {
  Assignment,
  CompletionOutcome,
  CompletionPageAnswer,
  CompletionReport,
  LeaseRef,
  LeaseTickAnswer,
  LeaseTickPage,
  PullOutcome,
  PullPageOutcome,
  UnnamedLease,
  WorkerCaller,
} from './cluster-lease-store';
export type { RunnerStore } from '../runner-store';
export type { ExecutionStore } from '../execution-store';
export {
  openPostgresGrantAdministration,
  PostgresGrantAdministration,
  PostgresManagementStore,
} from './management-store';
export type { GrantAdministration, ManagementStore } from '../management-store';
export type { PostgresRunStoreOptions } from './run-store';
export { migratePostgres, MIGRATIONS_TABLE } from './migrate';
export { grantRuntime, RUNTIME_PRIVILEGES } from './roles';
export { postgresReadiness } from './readiness';
export type { PostgresReadiness, ReadinessOptions } from './readiness';
export { IDLE_IN_TRANSACTION_TIMEOUT, LOCK_TIMEOUT, STATEMENT_TIMEOUT } from './transaction';
export type { PostgresTarget } from './connection';
export type { DispatchRepository } from '../dispatch-repository';
export type { RunStore } from '../run-store';

export interface PostgresStoreOptions {
  /** Accepted and ignored: the database is the only clock (design/postgres §D3). */
  readonly clock?: () => number;
  /** Check readiness (as the connected role) before handing out the store; default true. */
  readonly checkReadiness?: boolean;
  /** Pool size when the store makes the pool from a connection string (pg's default is 10). */
  readonly maxConnections?: number;
  /** Named prepared statements for claim and recordResult; false behind a transaction-mode pooler. */
  readonly preparedStatements?: boolean;
}

export interface PostgresStore {
  readonly dispatchRepository: PostgresDispatchRepository;
  readonly runStore: PostgresRunStore;
  /** The local execution lifecycle's store (design/execution): active/deadline pages, the terminal CAS, the receipt journal. */
  readonly executionStore: PostgresExecutionStore;
  readonly runnerStore: PostgresRunnerStore;
  /** The management plane's store (reads grants; writes only dispatch, event and audit rows). */
  readonly managementStore: PostgresManagementStore;
  readiness(): Promise<PostgresReadiness>;
  /** The login role of this store's connections (session_user): the authenticated principal. */
  sessionUser(): Promise<string>;
  /** Ends the pool if the store made it from a connection string; a caller's pool stays open. */
  close(): Promise<void>;
}

/** Opens the store on the runtime role's pool or URL; no timer, listener or background work. */
export async function openPostgresStore(
  target: PostgresTarget,
  options: PostgresStoreOptions = {},
): Promise<PostgresStore> {
  const handle = poolFor(target, options.maxConnections);
  try {
    if (options.checkReadiness !== false) await postgresReadiness(handle.pool);
  } catch (error) {
    await handle.release();
    throw error;
  }
  return {
    dispatchRepository: new PostgresDispatchRepository(handle.pool, {
      ...(options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements }),
    }),
    runStore: new PostgresRunStore(handle.pool),
    executionStore: new PostgresExecutionStore(handle.pool),
    runnerStore: new PostgresRunnerStore(handle.pool),
    managementStore: new PostgresManagementStore(handle.pool),
    readiness: () => postgresReadiness(handle.pool),
    sessionUser: () => sessionUserOf(handle.pool),
    close: () => handle.release(),
  };
}
