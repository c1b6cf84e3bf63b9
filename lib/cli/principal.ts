// The CLI's principal and the plane it acts through (ADR-0458; docs/decisions/0040): `--as`, else
// PIDFENCE_PRINCIPAL, else the OS user name. It must hold grants like any other principal.
import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';

import type { Command } from 'commander';

import { PidfenceError, PidfenceRangeError } from '../base/errors';
import { ManagementPlane, principalOf } from '../management/index';
import { storeOptionsAdd, type CliIo, type StoreOptions } from './command';
import { storeOpen, storeTargetResolve, type StoreTarget } from './store-target';

export const PRINCIPAL_ENV = 'PIDFENCE_PRINCIPAL';

export interface ManagementOptions extends StoreOptions {
  readonly as?: string;
  readonly project?: string;
}

export function principalResolve(option: string | undefined, env: NodeJS.ProcessEnv): string {
  const fromEnv = env[PRINCIPAL_ENV];
  return option ?? (fromEnv === undefined || fromEnv === '' ? userInfo().username : fromEnv);
}

/** --db, --json and --as: every management subcommand. */
export function managementOptionsAdd(command: Command): Command {
  return storeOptionsAdd(command).option('--as <subject>', `the acting principal (default: $${PRINCIPAL_ENV}, else the OS user name)`);
}

export function projectRequired(options: ManagementOptions): string {
  if (options.project === undefined) throw new PidfenceRangeError('--project <id> is required.', 'ERR_PIDFENCE_USAGE');
  return options.project;
}

/** Reads never create a database: a missing SQLite file is an unreachable store, not an empty one. */
function targetForReading(options: ManagementOptions, io: CliIo): StoreTarget {
  const target = storeTargetResolve(options.db, io.env);
  if (target.kind === 'sqlite' && !existsSync(target.file)) {
    throw new PidfenceError(`no pidfence database at ${target.file}; pass --db <file|postgres-url> or set PIDFENCE_DB.`, 'ERR_PIDFENCE_STORE_UNAVAILABLE');
  }
  return target;
}

/** Opens the store, runs `use` with a plane acting as the resolved principal, and closes the store. */
export async function withManagementPlane<T>(options: ManagementOptions, io: CliIo, use: (plane: ManagementPlane) => Promise<T>): Promise<T> {
  // A malformed principal is a usage error, found before the database is touched.
  const { subject } = principalOf(principalResolve(options.as, io.env));
  const store = await storeOpen(targetForReading(options, io));
  try {
    return await use(new ManagementPlane({ store: store.management, principal: subject }));
  } finally {
    await store.close();
  }
}

/** Text lines `label  value`, aligned; the same facts the JSON carries. */
export function factLines(facts: ReadonlyArray<readonly [string, string | number | null]>): string {
  const width = Math.max(...facts.map(([label]) => label.length)) + 2;
  return facts.map(([label, value]) => `  ${label.padEnd(width)}${value === null ? '-' : String(value)}`).join('\n');
}

/** An epoch-ms fact as text: the number itself, then the ISO time for the reader. */
export function timeText(ms: number | null): string | null {
  return ms === null ? null : `${ms} (${new Date(ms).toISOString()})`;
}

export function jsonWrite(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
