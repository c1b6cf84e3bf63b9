// How the SQLite store prepares its statements (docs/decisions/0261): each set of named SQL texts of a
// connection is prepared lazily and kept. The texts live in the *-statements.ts files (docs/decisions/0410).
import type Database from 'better-sqlite3';

import { DISPATCH_SQL } from './dispatch-statements';
import { RUN_SQL } from './run-statements';

/** The statements every SQLite class of a store shares: the dispatch repository's and the runs'. */
export const SQL = { ...DISPATCH_SQL, ...RUN_SQL } as const;

/** A set of named SQL texts, prepared. */
export type Prepared<S extends Readonly<Record<string, string>>> = { readonly [K in keyof S]: Database.Statement };

export type PreparedStatements = Prepared<typeof SQL>;

/**
 * A set of statements of one connection, each prepared when first used and then kept
 * (better-sqlite3 re-prepares after schema changes): a process that only reads a run prepares only
 * that read, not the store's whole SQL (docs/decisions/0261). The connection's boundary keeps one
 * such set per SQL constant, shared by the five SQLite classes.
 */
export function lazyPreparedSet<S extends Readonly<Record<string, string>>>(
  database: Database.Database,
  sql: S,
): Prepared<S> {
  const prepared = {} as Record<string, Database.Statement>;
  for (const [name, text] of Object.entries(sql)) {
    Object.defineProperty(prepared, name, {
      configurable: true,
      enumerable: true,
      get: () => {
        const statement = database.prepare(text);
        Object.defineProperty(prepared, name, { value: statement, enumerable: true });
        return statement;
      },
    });
  }
  return prepared as Prepared<S>;
}
