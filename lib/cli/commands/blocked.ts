// `pidfence blocked --project <id> [--cursor <next>]` (design/dispatch §5.4, gate 18): one fixed page of 16
// blocked runs (run id, blocked time), the first page's database time pinned in the cursor.

import type { BlockedPage } from '../../management/index';
import { oneShotCommand } from '../command';
import { timeText } from '../output';
import { addManagementOptions, projectRequired, answerFromPlane, type ManagementOptions } from '../principal';

export function blockedText(page: BlockedPage): string {
  const header = `project ${page.projectId}: ${page.items.length} blocked run(s) on this page, as of ${timeText(page.asOfMs) ?? '-'}`;
  const width = Math.max('run'.length, ...page.items.map((item) => item.runId.length)) + 2;
  const rows = page.items.map((item) => `  ${item.runId.padEnd(width)}${timeText(item.blockedAtMs) ?? '-'}`);
  const next =
    page.next === null ? 'last page' : `next page: pidfence blocked --project ${page.projectId} --cursor ${page.next}`;
  return [header, `  ${'run'.padEnd(width)}blocked at`, ...rows, next].join('\n') + '\n';
}

export const blockedCommand = oneShotCommand<ManagementOptions & { cursor?: string }>(
  'blocked',
  "one page (16) of the project's blocked runs, oldest first (needs run.read)",
  (command) =>
    addManagementOptions(command)
      .option('--project <id>', 'the project (required)')
      .option('--cursor <next>', 'the `next` cursor of the previous page'),
  async (io, _arguments, options) => {
    const project = projectRequired(options);
    return await answerFromPlane(options, io, (plane) => plane.blockedPage(project, options.cursor), blockedText);
  },
);
