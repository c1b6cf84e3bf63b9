// Which store the CLI talks to: `--db` (or PIDFENCE_DB) is a SQLite file path, or a
// postgres:// URL. PostgreSQL code is loaded only for a URL, so SQLite use never loads `pg`.
import { accessSync, constants as fsConstants } from 'node:fs';
import * as path from 'node:path';

import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { POSTGRES_URL, validatePostgresUrl } from '../store/postgres/connection-string';
import { osPrincipal, storeOwnerSubject } from './os-user';
import type { DispatchRepository } from '../store/dispatch-repository';
import type { GrantAdministration, ManagementStore } from '../store/management-store';
import type { RunStore } from '../store/run-store';
import type { RunnerStore } from '../store/runner-store';

export const DB_ENV = 'PIDFENCE_DB';
export const DEFAULT_SQLITE_FILE = 'pidfence.db';

export type StoreTarget =
  { readonly kind: 'sqlite'; readonly file: string } | { readonly kind: 'postgres'; readonly url: string };

/** Any other URL scheme (`mysql://`, `sqlite://`): a usage error, never a relative file name. */
const OTHER_URL = /^([a-z][a-z0-9+.-]*):\/\//i;

/** A malformed postgres:// URL or another scheme is bad input (exit 2), decided before any store code loads (docs/decisions/0225). */
export function resolveStoreTarget(option: string | undefined, env: NodeJS.ProcessEnv = process.env): StoreTarget {
  const value = option ?? env[DB_ENV] ?? DEFAULT_SQLITE_FILE;
  if (POSTGRES_URL.test(value)) return { kind: 'postgres', url: validatePostgresUrl(value) };
  const scheme = OTHER_URL.exec(value)?.[1];
  if (scheme !== undefined) {
    throw new PidfenceRangeError(
      `--db (or ${DB_ENV}) takes a SQLite file path or a postgres:// URL; ${scheme.toLowerCase()}:// is not a store pidfence can use.`,
      'ERR_PIDFENCE_USAGE',
    );
  }
  return { kind: 'sqlite', file: path.resolve(value) };
}

/** What every command gets: the two store interfaces and a way to close them. */
export interface OpenStore {
  readonly target: StoreTarget;
  readonly dispatchRepository: DispatchRepository;
  readonly runStore: RunStore;
  readonly managementStore: ManagementStore;
  /** Who owns which attempt (a cancel finds the runner to wake, docs/decisions/0175). */
  readonly runnerStore: RunnerStore;
  /** Who the store authenticated: the OS user on SQLite, the login role (session_user) on PostgreSQL. */
  authenticatedSubject(): Promise<string>;
  close(): Promise<void>;
}

/** Whether opening may create a missing SQLite file: only run, supervise, grant --bootstrap and migrate may. */
export interface StoreOpenOptions {
  readonly create: boolean;
  /**
   * The command only reads (status, list, show, blocked, inspect): a SQLite store this user cannot
   * write, or whose directory it cannot write, is opened read-only instead of refused (docs/decisions/0226).
   */
  readonly readsOnly?: boolean;
}

/** Whether this user may write `file` and create files beside it (SQLite's -wal and -shm). */
function writableHere(file: string): boolean {
  try {
    accessSync(file, fsConstants.W_OK);
    accessSync(path.dirname(file), fsConstants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** A SQLite file that cannot be opened is an unreachable store (exit 3), not a bug. */
function sqliteUnavailable(file: string, error: unknown): Error {
  if (error instanceof PidfenceError) return error;
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : 'UNKNOWN';
  return new PidfenceError(
    `cannot open the SQLite database ${file} (${code}); check the path and its permissions, or pass --db.`,
    'ERR_PIDFENCE_STORE_UNAVAILABLE',
    { errno: code, cause: error },
  );
}

export async function openSqlite(
  file: string,
  options: StoreOpenOptions,
): Promise<import('../store/sqlite/index').SqliteStore> {
  const { openSqliteStore } = await import('../store/sqlite/index');
  // Read before opening: a file this command creates is its own.
  const ownerSubject = storeOwnerSubject(file);
  try {
    const readonly = options.readsOnly === true && !options.create && !writableHere(file);
    return openSqliteStore(file, {
      create: options.create,
      readonly,
      ...(ownerSubject === undefined ? {} : { ownerSubject }),
    });
  } catch (error) {
    throw sqliteUnavailable(file, error);
  }
}

/**
 * Grant writes (docs/decisions/0040): on SQLite the file's writer is its owner; on PostgreSQL the
 * URL must be the migration owner's, because the runtime role may only read grants.
 */
export async function openGrantAdministration(
  target: StoreTarget,
  options: StoreOpenOptions,
): Promise<GrantAdministration & { authenticatedSubject(): Promise<string>; close(): Promise<void> }> {
  if (target.kind === 'sqlite') {
    const store = await openSqlite(target.file, options);
    const { managementStore: management } = store;
    return {
      hasPermission: (...args) => management.hasPermission(...args),
      countGrants: () => management.countGrants(),
      writeGrant: (...args) => management.writeGrant(...args),
      revokeGrant: (...args) => management.revokeGrant(...args),
      listGrants: (...args) => management.listGrants(...args),
      authenticatedSubject: async () => osPrincipal(),
      close: async () => store.close(),
    };
  }
  const { openPostgresGrantAdministration } = await import('../store/postgres/index');
  return openPostgresGrantAdministration(target.url);
}

/** Opens either store; `create` defaults to false, so reading or requesting never makes a database. */
export async function openStore(
  target: StoreTarget,
  options: StoreOpenOptions = { create: false },
): Promise<OpenStore> {
  if (target.kind === 'sqlite') {
    const store = await openSqlite(target.file, options);
    return {
      target,
      dispatchRepository: store.dispatchRepository,
      runStore: store.runStore,
      managementStore: store.managementStore,
      runnerStore: store.runnerStore,
      authenticatedSubject: async () => osPrincipal(),
      close: async () => store.close(),
    };
  }
  const { openPostgresStore } = await import('../store/postgres/index');
  const store = await openPostgresStore(target.url);
  return {
    target,
    dispatchRepository: store.dispatchRepository,
    runStore: store.runStore,
    managementStore: store.managementStore,
    runnerStore: store.runnerStore,
    authenticatedSubject: () => store.sessionUser(),
    close: () => store.close(),
  };
}
