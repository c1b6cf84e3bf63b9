// The stores of the execution verbs (`run`, `cancel`, `supervise`): the SQLite file of the store
// target with its receipt and log directories beside it, or the PostgreSQL store of a `postgres://`
// URL with a receipt directory on this host named after the database (its logs beside it).
// PostgreSQL code is loaded only for a URL.
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import * as path from 'node:path';

import type { ExecutionStores } from '../execution/index';
import { logDirectoryBeside } from '../execution/job-log';
import { wakeDirectoryBeside } from '../execution/wake-channel';
import type { ManagementStore } from '../store/management-store';
import { openSqlite, type StoreTarget } from './store-target';

export interface ExecutionTarget {
  readonly stores: ExecutionStores;
  /** Where the completion receipts of this store live on this host. */
  readonly receiptDirectory: string;
  /** Where the wake-up sockets of this store's runners on this host live (docs/decisions/0175). */
  readonly wakeDirectory: string;
  /** Where the jobs' logs of this store live on this host (docs/decisions/0250). */
  readonly logDirectory: string;
  /** The store's management reads (supervise's metrics and status page); closed with `stores`. */
  readonly managementStore: ManagementStore;
}

/** Overrides where a PostgreSQL store's receipts live on this host. */
export const RECEIPTS_ENV = 'PIDFENCE_RECEIPTS';

/**
 * Receipts are host-local files. For a PostgreSQL store every runner and `run` on this host that
 * names the same server and database (role and password aside) shares one directory under the
 * user's state directory, so `supervise` finds what a crashed `run` left behind.
 */
export function postgresReceiptDirectory(url: string, env: NodeJS.ProcessEnv = process.env): string {
  const override = env[RECEIPTS_ENV];
  if (override !== undefined && override !== '') return path.resolve(override);
  const parsed = new URL(url);
  const key = `${parsed.hostname}:${parsed.port === '' ? '5432' : parsed.port}/${decodeURIComponent(parsed.pathname.replace(/^\//, ''))}`;
  const digest = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const stateHome =
    env.XDG_STATE_HOME !== undefined && env.XDG_STATE_HOME !== ''
      ? env.XDG_STATE_HOME
      : path.join(homedir(), '.local', 'state');
  return path.join(path.resolve(stateHome), 'pidfence', 'receipts', `pg-${digest}`);
}

/**
 * Where the wake-up sockets of the target's runners on this host are (docs/decisions/0175): beside
 * the SQLite file, or beside a PostgreSQL store's host-local receipts (a cancel on another host
 * reaches the runner on its next cycle).
 */
export function wakeDirectoryOf(target: StoreTarget, env: NodeJS.ProcessEnv = process.env): string {
  return wakeDirectoryBeside(target.kind === 'sqlite' ? target.file : postgresReceiptDirectory(target.url, env));
}

/** Where the logs of the target's runs on this host are (docs/decisions/0250): beside the SQLite file, or beside a PostgreSQL store's receipts. */
export function logDirectoryOf(target: StoreTarget, env: NodeJS.ProcessEnv = process.env): string {
  return logDirectoryBeside(target.kind === 'sqlite' ? target.file : postgresReceiptDirectory(target.url, env));
}

export async function openExecutionTarget(
  target: StoreTarget,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ExecutionTarget> {
  if (target.kind === 'postgres') {
    const { openPostgresStore } = await import('../store/postgres/index');
    const store = await openPostgresStore(target.url);
    return {
      stores: {
        runStore: store.runStore,
        repository: store.dispatchRepository,
        executionStore: store.executionStore,
        runnerStore: store.runnerStore,
        close: () => store.close(),
      },
      receiptDirectory: postgresReceiptDirectory(target.url, env),
      wakeDirectory: wakeDirectoryOf(target, env),
      logDirectory: logDirectoryOf(target, env),
      managementStore: store.managementStore,
    };
  }
  // run and supervise may create the store; its trouble is a sentence and exit 3 like every command's.
  const store = await openSqlite(target.file, { create: true });
  return {
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
    receiptDirectory: `${target.file}.receipts`,
    wakeDirectory: wakeDirectoryOf(target, env),
    logDirectory: logDirectoryOf(target, env),
    managementStore: store.managementStore,
  };
}
