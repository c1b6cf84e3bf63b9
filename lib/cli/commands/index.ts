// Every `pidfence` subcommand, in help order. One file per subcommand beside this one.
import type { CliCommand } from '../command';
import { blockedCommand } from './blocked';
import { cancelCommand } from './cancel';
import { controlPlaneCommand } from './control-plane';
import { grantCommand } from './grant';
import { grantRuntimeCommand } from './grant-runtime';
import { inspectCommand } from './inspect';
import { listCommand } from './list';
import { migrateCommand } from './migrate';
import { rearmCommand } from './rearm';
import { runCommand } from './run';
import { showCommand } from './show';
import { statusCommand } from './status';
import { superviseCommand } from './supervise';
import { workerCommand } from './worker';

export const commands: readonly CliCommand[] = [runCommand, cancelCommand, superviseCommand, statusCommand, listCommand, showCommand, blockedCommand, inspectCommand, rearmCommand, grantCommand, migrateCommand, grantRuntimeCommand, controlPlaneCommand, workerCommand];
