// Every `pidfence` subcommand, in help order. One file per subcommand beside this one.
import type { CliCommand } from '../command';
import { blockedCommand } from './blocked';
import { grantCommand } from './grant';
import { inspectCommand } from './inspect';
import { rearmCommand } from './rearm';
import { statusCommand } from './status';

export const commands: readonly CliCommand[] = [statusCommand, blockedCommand, inspectCommand, rearmCommand, grantCommand];
