// The CLI's principal and the plane it acts through (design/dispatch §5.1; docs/decisions/0040, 0044): the
// store's authenticated subject (the OS user on SQLite, session_user on PostgreSQL). `--as` or
// PIDFENCE_PRINCIPAL act as someone else, which needs grants.write and is audited "A acting as B".
import type { Command } from 'commander';

import { PidfenceRangeError } from '../base/errors';
import type { Permission } from '../contract/index';
import {
  ManagementPlane,
  NotPermittedError,
  principalOf,
  RunNotVisibleError,
  type Principal,
} from '../management/index';
import { addStoreOptions, writeAnswer, type CliIo, type StoreOptions } from './command';
import { invokedAs, shellQuote, storeName } from './job-messages';
import { EXIT, type ExitCode } from './exit-codes';
import { openStore, resolveStoreTarget, type StoreTarget } from './store-target';

export const PRINCIPAL_ENV = 'PIDFENCE_PRINCIPAL';

export interface ManagementOptions extends StoreOptions {
  readonly as?: string;
  readonly project?: string;
}

/** The subject asked for with --as or $PIDFENCE_PRINCIPAL, if any; it is validated before the store is touched. */
export function requestedPrincipal(option: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const fromEnv = env[PRINCIPAL_ENV];
  const requested = option ?? (fromEnv === undefined || fromEnv === '' ? undefined : fromEnv);
  return requested === undefined ? undefined : principalOf(requested).subject;
}

/** The principal a command acts as: the requested subject, carrying who really asked when they differ. */
export function actingPrincipal(requested: string | undefined, authenticated: string): Principal {
  return principalOf(requested ?? authenticated, authenticated);
}

/** --db, --json and --as: every management subcommand. */
export function addManagementOptions(command: Command): Command {
  return addStoreOptions(command).option(
    '--as <subject>',
    `act as another subject (also $${PRINCIPAL_ENV}); needs grants.write on the project, and is audited`,
  );
}

export function projectRequired(options: ManagementOptions): string {
  if (options.project === undefined) throw new PidfenceRangeError('--project <id> is required.', 'ERR_PIDFENCE_USAGE');
  return options.project;
}

/** What a management command does to the store: `read` opens a store this user cannot write read-only (docs/decisions/0226). */
export type StoreAccess = 'read' | 'write';

/** Opens the store, runs `use` with a plane acting as the resolved principal, and closes the store. */
export async function withManagementPlane<T>(
  options: ManagementOptions,
  io: CliIo,
  use: (plane: ManagementPlane) => Promise<T>,
  access: StoreAccess = 'read',
): Promise<T> {
  // A malformed principal is a usage error, found before the database is touched.
  const requested = requestedPrincipal(options.as, io.env);
  // Reads never create a database: a missing SQLite file is an unreachable store, not an empty one.
  const target = resolveStoreTarget(options.db, io.env);
  const store = await openStore(target, { create: false, readsOnly: access === 'read' });
  try {
    const principal = actingPrincipal(requested, await store.authenticatedSubject());
    const plane = new ManagementPlane({
      store: store.managementStore,
      principal: principal.subject,
      ...(principal.authenticated === undefined ? {} : { authenticatedAs: principal.authenticated }),
    });
    return await nameStoreInRefusal(target, io.env, use(plane));
  } finally {
    await store.close();
  }
}

/**
 * The body every management read command shares: ask the plane as the resolved principal, print the
 * answer as one JSON document (--json) or as text, and exit with `exitOf(answer)` (0 by default).
 */
export async function answerFromPlane<T>(
  options: ManagementOptions,
  io: CliIo,
  ask: (plane: ManagementPlane) => Promise<T>,
  text: (answer: T) => string,
  exitOf: (answer: T) => ExitCode = () => EXIT.ok,
  access: StoreAccess = 'read',
): Promise<ExitCode> {
  const answer = await withManagementPlane(options, io, ask, access);
  writeAnswer(io, options.json, answer, text);
  return exitOf(answer);
}

/**
 * The command that gives a permission on this store (docs/decisions/0170), `--db` included, called
 * the way the user called pidfence (`npx pidfence` under npx; docs/decisions/0391): on
 * SQLite the file's owner holds every grant; on PostgreSQL grants are written through the migration
 * owner's URL, by a holder of grants.write, or by --bootstrap while the database holds no grant.
 */
export function howToGetPermission(
  target: StoreTarget,
  env: NodeJS.ProcessEnv,
  subject: string,
  projectId: string,
  permission: Permission,
): string {
  const pidfence = invokedAs(env);
  if (target.kind === 'sqlite') {
    return `the user who owns ${target.file} holds every grant on it and can run \`${pidfence} grant ${subject} ${projectId} ${permission} --db ${shellQuote(target.file)}\``;
  }
  return `a holder of grants.write on it can run \`${pidfence} grant ${subject} ${projectId} ${permission} --db <migration-owner-url>\` (on a database without grants, first \`${pidfence} grant --bootstrap <owner-role> ${projectId} grants.write --db <migration-owner-url>\`)`;
}

/**
 * A refusal as this store's user reads it: a run the caller cannot see names the store it was
 * asked of (the same for a missing and a foreign run), and a missing permission ends in the
 * command that gives it.
 */
export function refusalInStore(target: StoreTarget, env: NodeJS.ProcessEnv, error: unknown): unknown {
  if (error instanceof RunNotVisibleError) return error.inStore(storeName(target));
  if (error instanceof NotPermittedError)
    return error.withHowToGet(howToGetPermission(target, env, error.subject, error.projectId, error.permission));
  return error;
}

export async function nameStoreInRefusal<T>(target: StoreTarget, env: NodeJS.ProcessEnv, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    throw refusalInStore(target, env, error);
  }
}
