// Which store the CLI talks to: `--db` (or PIDFENCE_DB) is a SQLite file path, or a
// postgres:// URL. PostgreSQL code is loaded only for a URL, so SQLite use never loads `pg`.
import * as path from 'node:path';

import type { DispatchRepository } from '../store/dispatch-repository';
import type { RunStore } from '../store/run-store';

export const DB_ENV = 'PIDFENCE_DB';
export const DEFAULT_SQLITE_FILE = 'pidfence.db';

export type StoreTarget = { readonly kind: 'sqlite'; readonly file: string } | { readonly kind: 'postgres'; readonly url: string };

export function storeTargetResolve(option: string | undefined, env: NodeJS.ProcessEnv = process.env): StoreTarget {
  const value = option ?? env[DB_ENV] ?? DEFAULT_SQLITE_FILE;
  if (/^postgres(ql)?:\/\//.test(value)) return { kind: 'postgres', url: value };
  return { kind: 'sqlite', file: path.resolve(value) };
}

/** What every command gets: the two store interfaces and a way to close them. */
export interface OpenStore {
  readonly target: StoreTarget;
  readonly repository: DispatchRepository;
  readonly runStore: RunStore;
  close(): Promise<void>;
}

export async function storeOpen(target: StoreTarget): Promise<OpenStore> {
  if (target.kind === 'sqlite') {
    const { openSqliteStore } = await import('../store/sqlite/index');
    const store = openSqliteStore(target.file);
    return { target, repository: store.repository, runStore: store.runStore, close: async () => store.close() };
  }
  const { openPostgresStore } = await import('../store/postgres/index');
  const store = await openPostgresStore(target.url);
  return { target, repository: store.repository, runStore: store.runStore, close: () => store.close() };
}
