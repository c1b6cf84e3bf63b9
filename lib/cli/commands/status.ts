// `pidfence status --project <id>` (design/dispatch §5.3, gate 17): the project summary as a one-shot status
// card, text or --json from the same facts, exit 0 / 10 / 20 for clear / converging / attention.

import { BLOCKING_RESULTS, DISPATCH_STATUSES, type Assessment } from '../../contract/index';
import type { ProjectSummary } from '../../management/index';
import { oneShotCommand } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { factLines, timeText } from '../output';
import { addManagementOptions, projectRequired, answerFromPlane, type ManagementOptions } from '../principal';

export const ASSESSMENT_EXIT: Readonly<Record<Assessment, ExitCode>> = {
  clear: EXIT.ok,
  converging: EXIT.converging,
  attention_required: EXIT.attentionRequired,
};

export function statusText(summary: ProjectSummary): string {
  const facts: Array<readonly [string, string | number | null]> = [
    ['assessment', summary.assessment],
    ['as of', timeText(summary.asOfMs)],
    ['dispatches', summary.total],
    ...DISPATCH_STATUSES.map((status) => [status, summary.states[status]] as const),
    ...BLOCKING_RESULTS.map((result) => [`blocked by ${result}`, summary.blockingResults[result]] as const),
    [`overdue (> ${summary.overdueAfterMs} ms)`, summary.overdue],
    ['unsettled, run ended', summary.runEnded],
    ['running jobs', summary.running],
  ];
  return `project ${summary.projectId}: ${summary.assessment}\n${factLines(facts)}\n`;
}

export const statusCommand = oneShotCommand<ManagementOptions>(
  'status',
  'one-shot project summary; exit 0 clear, 10 converging (jobs running or stops in flight), 20 attention required (needs run.read)',
  (command) => addManagementOptions(command).option('--project <id>', 'the project to summarise (required)'),
  async (io, _arguments, options) => {
    const project = projectRequired(options);
    return await answerFromPlane(
      options,
      io,
      (plane) => plane.summary(project),
      statusText,
      (summary) => ASSESSMENT_EXIT[summary.assessment],
    );
  },
);
