// Option handling shared by every subcommand: what belongs to pidfence and what belongs to the
// job. Everything after `--` is the job's, so `pidfence run echo -- --json` never turns on JSON.

/** The arguments pidfence itself parses: those before the first `--`. */
export function ownArguments(argv: readonly string[]): readonly string[] {
  const end = argv.indexOf('--');
  return end === -1 ? argv : argv.slice(0, end);
}

/** Whether --json was given to pidfence (not to the job), so even a failed parse answers in JSON. */
export function jsonRequested(argv: readonly string[]): boolean {
  return ownArguments(argv).includes('--json');
}

/** The subcommand named on the command line: the first of pidfence's own arguments that is not an option. */
export function subcommandOf(argv: readonly string[]): string | undefined {
  return ownArguments(argv).find((arg) => !arg.startsWith('-'));
}

/**
 * `pidfence --json list` as `pidfence list --json`: --json is every subcommand's option, so one
 * written before the subcommand moves after it (docs/decisions/0225).
 */
export function withJsonAfterSubcommand(argv: readonly string[]): readonly string[] {
  const own = ownArguments(argv);
  const at = own.findIndex((arg) => !arg.startsWith('-'));
  if (at <= 0 || !own.slice(0, at).includes('--json')) return argv;
  const before = own.slice(0, at).filter((arg) => arg !== '--json');
  return [...before, own[at] as string, '--json', ...argv.slice(at + 1)];
}

/** Commands whose trailing arguments are a job's command line. */
const JOB_COMMANDS = new Set(['run']);

/**
 * `pidfence run ls -la` reads -la as pidfence's option. When commander rejects such an option,
 * say how to hand it to the job instead.
 */
export function unknownOptionHint(commanderCode: string, argv: readonly string[]): string | undefined {
  if (commanderCode !== 'commander.unknownOption') return undefined;
  const command = subcommandOf(argv);
  if (command === undefined || !JOB_COMMANDS.has(command)) return undefined;
  return `hint: options after the command belong to pidfence unless they follow \`--\`: pidfence ${command} [options] -- COMMAND [ARGS...]`;
}
