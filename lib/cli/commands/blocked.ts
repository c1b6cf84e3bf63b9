// `pidfence blocked --project <id> [--cursor <next>]` (design/dispatch §5.4, gate 18): one fixed page of 16
// blocked runs (run id, blocked time), the first page's database time pinned in the cursor.
import type { Command } from 'commander';

import type { BlockedPage } from '../../management/index';
import type { CliCommand, CliIo } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson, timeText } from '../output';
import { addManagementOptions, projectRequired, withManagementPlane, type ManagementOptions } from '../principal';

export function blockedText(page: BlockedPage): string {
  const header = `project ${page.projectId}: ${page.items.length} blocked run(s) on this page, as of ${timeText(page.asOfMs) ?? '-'}`;
  const width = Math.max('run'.length, ...page.items.map((item) => item.runId.length)) + 2;
  const rows = page.items.map((item) => `  ${item.runId.padEnd(width)}${timeText(item.blockedAtMs) ?? '-'}`);
  const next = page.next === null ? 'last page' : `next page: pidfence blocked --project ${page.projectId} --cursor ${page.next}`;
  return [header, `  ${'run'.padEnd(width)}blocked at`, ...rows, next].join('\n') + '\n';
}

export const blockedCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addManagementOptions(program.command('blocked'))
      .description('one page (16) of the project\'s blocked runs, oldest first (needs run.read)')
      .option('--project <id>', 'the project (required)')
      .option('--cursor <next>', 'the `next` cursor of the previous page')
      .action(async (options: ManagementOptions & { cursor?: string }) => {
        const project = projectRequired(options);
        const page = await withManagementPlane(options, io, (plane) => plane.blockedPage(project, options.cursor));
        if (options.json === true) writeJson(io, page);
        else io.stdout.write(blockedText(page));
        done(EXIT.ok);
      });
  },
};
