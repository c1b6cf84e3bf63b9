// Every `pidfence` subcommand, in help order. One file per subcommand beside this one.
import type { CliCommand } from '../command';

export const commands: readonly CliCommand[] = [];
