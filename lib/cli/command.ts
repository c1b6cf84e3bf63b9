// The shape every `pidfence` subcommand has: a commander definition and an action that returns
// an exit code. Errors the user can act on are PidfenceErrors, printed as one line (main.ts).
import type { Command } from 'commander';

import type { ExitCode } from './exit-codes';
import { writeJson, type CliIo } from './output';

// The io type lives with the writers (output.ts imports nothing of the CLI); commands name it here too.
export type { CliIo };

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

/**
 * A one-shot subcommand: `define` adds its options and arguments, `run` gets the positional
 * arguments (the tuple A, one string per required argument) and the options, and returns the exit code. An error it throws
 * is main.ts's to print (one sentence, exit status by category).
 */
export function oneShotCommand<O, A extends readonly string[] = []>(
  name: string,
  description: string,
  define: (command: Command) => Command,
  run: (io: CliIo, args: A, options: O) => Promise<ExitCode>,
): CliCommand {
  return {
    register(program, io, done) {
      define(program.command(name).description(description)).action(async (...values: unknown[]) => {
        const command = values[values.length - 1] as Command;
        // commander has checked every required <argument>, so the tuple A holds.
        done(await run(io, command.processedArgs as unknown as A, command.opts() as O));
      });
    },
  };
}

/** A one-shot command's answer: one JSON document under --json, else its text. */
export function writeAnswer<T>(io: CliIo, json: boolean | undefined, answer: T, text: (answer: T) => string): void {
  if (json === true) writeJson(io, answer);
  else io.stdout.write(text(answer));
}
