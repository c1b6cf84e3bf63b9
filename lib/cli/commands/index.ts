// Every `pidfence` subcommand, in help order. One file per subcommand beside this one. Each is
// loaded only when asked for (docs/decisions/0177): `pidfence cancel` loads cancel's code, not
// PostgreSQL, Fastify, prom-client, cluster or web code; help and unknown words load them all.
import type { CliCommand } from '../command';

/* eslint-disable @typescript-eslint/no-require-imports -- a lazy require per subcommand is the point */
const LOADERS: ReadonlyArray<readonly [string, () => CliCommand]> = [
  ['run', () => (require('./run') as typeof import('./run')).runCommand],
  ['cancel', () => (require('./cancel') as typeof import('./cancel')).cancelCommand],
  ['supervise', () => (require('./supervise') as typeof import('./supervise')).superviseCommand],
  ['status', () => (require('./status') as typeof import('./status')).statusCommand],
  ['list', () => (require('./list') as typeof import('./list')).listCommand],
  ['show', () => (require('./show') as typeof import('./show')).showCommand],
  ['logs', () => (require('./logs') as typeof import('./logs')).logsCommand],
  ['blocked', () => (require('./blocked') as typeof import('./blocked')).blockedCommand],
  ['inspect', () => (require('./inspect') as typeof import('./inspect')).inspectCommand],
  ['rearm', () => (require('./rearm') as typeof import('./rearm')).rearmCommand],
  ['grant', () => (require('./grant') as typeof import('./grant')).grantCommand],
  ['migrate', () => (require('./migrate') as typeof import('./migrate')).migrateCommand],
  ['grant-runtime', () => (require('./grant-runtime') as typeof import('./grant-runtime')).grantRuntimeCommand],
  ['control-plane', () => (require('./control-plane') as typeof import('./control-plane')).controlPlaneCommand],
  ['worker', () => (require('./worker') as typeof import('./worker')).workerCommand],
  ['workers', () => (require('./workers') as typeof import('./workers')).workersCommand],
];

/** Every word that names a command: the subcommands, `list`'s alias `ps`, and commander's `help`. */
export const COMMAND_WORDS: ReadonlySet<string> = new Set([...LOADERS.map(([name]) => name), 'ps', 'help']);

/** The subcommand named by the first word of `argv` alone, or every subcommand (help, a typo, no word). */
export function commandsFor(argv: readonly string[]): CliCommand[] {
  const named = LOADERS.find(([name]) => name === argv[0]);
  return named === undefined ? LOADERS.map(([, load]) => load()) : [named[1]()];
}
