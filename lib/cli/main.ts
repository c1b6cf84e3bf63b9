#!/usr/bin/env node
// `pidfence`: the command-line entry. Usage errors exit 2 with one line and the usage; an
// unreachable store exits 3 with a sentence; only a bug prints a stack trace (exit 1).
import { Command, CommanderError } from 'commander';

import { PidfenceError, PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import type { CliIo } from './command';
import { commands } from './commands/index';
import { EXIT, type ExitCode } from './exit-codes';

const STORE_UNAVAILABLE_CODES = new Set([
  'ERR_PIDFENCE_STORE_UNAVAILABLE',
  'ERR_PIDFENCE_STORE_FAILED',
  'ERR_PIDFENCE_MIGRATION_CHECKSUM',
  'ERR_PIDFENCE_MIGRATION_UNKNOWN',
  'ERR_PIDFENCE_MIGRATION_MISSING',
  'ERR_PIDFENCE_STORE_NOT_READY',
  'ERR_PIDFENCE_STORE_PRIVILEGE',
]);

export function programBuild(io: CliIo, done: (code: ExitCode) => void): Command {
  const program = new Command('pidfence')
    .description('Stop job processes safely and provably; inspect and repair durable cancellation.')
    .exitOverride()
    .configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) })
    .showHelpAfterError(true);
  for (const command of commands) command.register(program, io, done);
  return program;
}

/** The subcommand whose action is running, so an input error can be followed by its usage line. */
let activeCommand: Command | undefined;

function errorExitCode(error: unknown, io: CliIo): ExitCode {
  if (error instanceof CommanderError) {
    // --help and --version are "errors" to commander; they already printed what was asked.
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  if (error instanceof PidfenceTypeError || error instanceof PidfenceRangeError) {
    const usage = activeCommand === undefined ? '' : `Usage: pidfence ${activeCommand.name()} ${activeCommand.usage()}\n(run pidfence ${activeCommand.name()} --help for details)\n`;
    io.stderr.write(`pidfence: ${error.message}\n${usage}`);
    return EXIT.usage;
  }
  if (error instanceof PidfenceError) {
    io.stderr.write(`pidfence: ${error.message} (${error.code})\n`);
    return STORE_UNAVAILABLE_CODES.has(error.code) || error.code.startsWith('ERR_PIDFENCE_STORE_') ? EXIT.storeUnavailable : EXIT.refused;
  }
  io.stderr.write(`pidfence: unexpected failure, please report it:\n${(error as Error)?.stack ?? String(error)}\n`);
  return EXIT.failure;
}

export async function cliRun(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  let code: ExitCode | undefined;
  const program = programBuild(io, (value) => (code = value));
  activeCommand = undefined;
  program.hook('preAction', (_program, action) => {
    activeCommand = action;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    return errorExitCode(error, io);
  }
  if (code === undefined) {
    io.stderr.write(`pidfence: no command given\n${program.helpInformation()}`);
    return EXIT.usage;
  }
  return code;
}

if (require.main === module) {
  void cliRun(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then((code) => {
    process.exitCode = code;
  });
}
