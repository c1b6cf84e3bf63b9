// The shape every `pidfence` subcommand has: a commander definition and an action that returns
// an exit code. Errors the user can act on are PidfenceErrors, printed as one line (main.ts).
import type { Command } from 'commander';

import type { ExitCode } from './exit-codes';

export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
}

export interface CliCommand {
  /** Adds the subcommand to the program; its action must call `done(code)` exactly once. */
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void;
}

/** Options every store-backed subcommand takes. */
export interface StoreOptions {
  readonly db?: string;
  readonly json?: boolean;
}

export function addStoreOptions(command: Command): Command {
  return command
    .option('--db <path|url>', 'SQLite file, or a postgres:// URL (default: $PIDFENCE_DB, else ./pidfence.db)')
    .option('--json', 'machine-readable output (the same facts as the text)');
}
