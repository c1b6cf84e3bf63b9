// Every `pidfence` subcommand, in help order. One file per subcommand beside this one.
import type { CliCommand } from '../command';
import { cancelCommand } from './cancel';
import { runCommand } from './run';
import { superviseCommand } from './supervise';

export const commands: readonly CliCommand[] = [runCommand, cancelCommand, superviseCommand];
