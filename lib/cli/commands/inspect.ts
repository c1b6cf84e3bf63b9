// `pidfence inspect <runId>` (design/dispatch §5.1, gate 14): a run's dispatch facts, never lease owner,
// token or digest (needs run.read on the run's project).

import type { DispatchInspection } from '../../contract/index';
import { oneShotCommand } from '../command';
import { factLines, timeText } from '../output';
import { addManagementOptions, answerFromPlane, type ManagementOptions } from '../principal';

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

export const inspectCommand = oneShotCommand<ManagementOptions, [string]>(
  'inspect',
  "a run's cancellation dispatch: status, version, results, due and blocked times (needs run.read)",
  (command) => addManagementOptions(command).argument('<runId>', 'the run'),
  (io, [runId], options) =>
    answerFromPlane(
      options,
      io,
      (plane) => plane.inspect(runId),
      (inspection) => inspectionText(inspection, `run ${inspection.runId}`),
    ),
);
