// `pidfence inspect <runId>` (design/dispatch §5.1, gate 14): a run's dispatch facts, never lease owner,
// token or digest (needs run.read on the run's project).
import type { Command } from 'commander';

import type { DispatchInspection } from '../../contract/index';
import type { CliCommand, CliIo } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { factLines, writeJson, timeText } from '../output';
import { addManagementOptions, withManagementPlane, type ManagementOptions } from '../principal';

export function inspectionText(inspection: DispatchInspection, headline: string): string {
  return `${headline}\n${factLines([
    ['project', inspection.projectId],
    ['attempt', inspection.attemptId],
    ['status', inspection.status],
    ['version', inspection.version],
    ['dispatch count', inspection.dispatchCount],
    ['last result', inspection.lastResult],
    ['next due', timeText(inspection.nextAttemptAtMs)],
    ['blocked at', timeText(inspection.blockedAtMs)],
    ['last dispatched', timeText(inspection.lastDispatchedAtMs)],
    ['updated', timeText(inspection.updatedAtMs)],
  ])}\n`;
}

export const inspectCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addManagementOptions(program.command('inspect'))
      .description('a run\'s cancellation dispatch: status, version, results, due and blocked times (needs run.read)')
      .argument('<runId>', 'the run')
      .action(async (runId: string, options: ManagementOptions) => {
        const inspection = await withManagementPlane(options, io, (plane) => plane.inspect(runId));
        if (options.json === true) writeJson(io, inspection);
        else io.stdout.write(inspectionText(inspection, `run ${inspection.runId}`));
        done(EXIT.ok);
      });
  },
};
