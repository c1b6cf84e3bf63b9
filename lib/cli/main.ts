#!/usr/bin/env node
// `pidfence`: the command-line entry. The exit status follows from the error's category alone
// (lib/base/error-registry.ts; docs/decisions/0041): bad input 2, store unavailable or not ready
// 3, refused 4, internal 1. Only an error without a registered code prints a stack trace. In text,
// every error's first line is `pidfence: <sentence> (<code>)`, a usage error's too: the code its
// --json twin carries (docs/decisions/0390).
// First: `run` and `supervise` hold their stop signals from the first moment (docs/decisions/0162).
import './startup-signals';

import { Command, CommanderError } from 'commander';

import { CATEGORY_EXIT_STATUS, errorCategory, type ErrorCategory } from '../base/error-registry';
import { isPidfenceInputError } from '../base/errors';
import type { CliIo } from './command';
import { COMMAND_WORDS, commandsFor } from './commands/index';
import { EXIT, type ExitCode } from './exit-codes';
import { jsonRequested, subcommandOf, unknownOptionHint, withJsonAfterSubcommand } from './options';
import { writeJsonError } from './output';
import { packageVersion } from './version';

/** The code of a usage error commander finds (unknown option, missing argument) and of an unknown or missing command. */
const USAGE_CODE = 'ERR_PIDFENCE_USAGE';

/** One error as text: the sentence, then its stable code, as every text-mode error is written. */
function errorLine(message: string, code: string): string {
  return `pidfence: ${message} (${code})\n`;
}

/** Commander's `error: <reason>` (and a `(Did you mean …?)` line) as pidfence's own first line. */
function commanderErrorText(text: string): string {
  const [reason = '', ...more] = text.trimEnd().split('\n');
  return errorLine(reason.replace(/^error: /, ''), USAGE_CODE) + more.map((line) => `${line}\n`).join('');
}

/** The registry's exit statuses (lib/base/error-registry.ts), as the CLI's exit codes. */
export const CATEGORY_EXIT: Readonly<Record<ErrorCategory, ExitCode>> = CATEGORY_EXIT_STATUS;

/** `json`: commander's own error text is held back, and the error is written as JSON instead. */
export function buildProgram(
  io: CliIo,
  done: (code: ExitCode) => void,
  json = false,
  argv: readonly string[] = [],
): Command {
  const program = new Command('pidfence')
    .description('Stop job processes safely and provably; inspect and repair durable cancellation.')
    .version(packageVersion(), '-V, --version', 'print the pidfence version')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => {
        if (!json) io.stderr.write(text);
      },
      outputError: (text, write) => write(commanderErrorText(text)),
    })
    .showHelpAfterError(true);
  for (const command of commandsFor(argv)) command.register(program, io, done);
  return program;
}

/** The subcommand whose action is running, so an input error can be followed by its usage line. */
let activeCommand: Command | undefined;

function usageLines(): string {
  if (activeCommand === undefined) return '';
  // A nested command (`worker drain`) is named with its parents.
  const names: string[] = [];
  for (let command: Command | null = activeCommand; command?.parent != null; command = command.parent)
    names.unshift(command.name());
  const name = names.join(' ');
  return `Usage: pidfence ${name} ${activeCommand.usage()}\n(run pidfence ${name} --help for details)\n`;
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PIDFENCE_') ? code : undefined;
}

function errorExitCode(error: unknown, io: CliIo, json: boolean, argv: readonly string[]): ExitCode {
  if (error instanceof CommanderError) {
    // --help and --version are "errors" to commander; they already printed what was asked.
    if (error.exitCode === 0) return EXIT.ok;
    const hint = unknownOptionHint(error.code, argv);
    if (json)
      writeJsonError(
        io,
        USAGE_CODE,
        'input',
        `${error.message.replace(/^error: /, '')}${hint === undefined ? '' : `; ${hint}`}`,
      );
    else if (hint !== undefined) io.stderr.write(`${hint}\n`);
    return EXIT.usage;
  }
  const code = codeOf(error);
  if (code === undefined) {
    io.stderr.write(`pidfence: unexpected failure, please report it:\n${(error as Error)?.stack ?? String(error)}\n`);
    return EXIT.failure;
  }
  const category = errorCategory(code);
  const message = (error as Error).message;
  if (json) writeJsonError(io, code, category, message);
  else if (category === 'input' && isPidfenceInputError(error))
    io.stderr.write(`${errorLine(message, code)}${usageLines()}`);
  else if (category === 'internal')
    io.stderr.write(`pidfence: ${message} (${code}); this is a pidfence bug or a damaged store, please report it.\n`);
  else io.stderr.write(errorLine(message, code));
  return CATEGORY_EXIT[category];
}

/** A word that names no command: one sentence (or one JSON error), exit 2, before commander prints its help. */
function unknownCommand(word: string, io: CliIo, json: boolean): ExitCode {
  const message = `unknown command '${word}'; run pidfence --help for the commands.`;
  if (json) writeJsonError(io, USAGE_CODE, 'input', message);
  else io.stderr.write(errorLine(message, USAGE_CODE));
  return EXIT.usage;
}

/** `pidfence` alone: the one-line error with its code, then the commands (commander would print only its help). */
function noCommand(io: CliIo, program: Command): ExitCode {
  io.stderr.write(`${errorLine('no command given', USAGE_CODE)}${program.helpInformation()}`);
  return EXIT.usage;
}

export async function runCli(given: readonly string[], io: CliIo): Promise<ExitCode> {
  let code: ExitCode | undefined;
  const argv = withJsonAfterSubcommand(given);
  const json = jsonRequested(argv);
  const word = subcommandOf(argv);
  if (word !== undefined && !COMMAND_WORDS.has(word)) return unknownCommand(word, io, json);
  const program = buildProgram(io, (value) => (code = value), json, argv);
  if (argv.length === 0) return noCommand(io, program);
  activeCommand = undefined;
  program.hook('preAction', (_program, action) => {
    activeCommand = action;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    return errorExitCode(error, io, json, argv);
  }
  return code ?? noCommand(io, program);
}

/** Node's module compile cache where the runtime has it (22.1+; absent on Node 20): later starts skip compiling. */
function enableCompileCache(): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the node:module API differs by version
  const { enableCompileCache: enable } = require('node:module') as { enableCompileCache?: () => unknown };
  try {
    enable?.();
  } catch {
    // a cache directory that cannot be written only costs the compile
  }
}

if (require.main === module) {
  enableCompileCache();
  void runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then(
    (code) => {
      process.exitCode = code;
    },
  );
}
