// `pidfence list` (alias `ps`) (docs/decisions/0140, 0251): one page of a project's runs, newest first —
// name, state, start, end, exit and the reason a stop was asked for; `--state` filters, `--cursor` pages
// on. Needs run.read on the project. Never a PID, handle, command or environment.
import { InvalidArgumentError } from 'commander';

import { RUN_STATUSES, type RunStatus } from '../../contract/index';
import {
  RUN_LIST_PAGE_DEFAULT,
  RUN_LIST_PAGE_MAX,
  type RunExit,
  type RunListItem,
  type RunListPage,
} from '../../management/index';
import { oneShotCommand, writeAnswer } from '../command';
import { addControlPlaneOptions, controlPlaneTarget, type ControlPlaneOptions } from '../control-plane-target';
import { EXIT } from '../exit-codes';
import { tableLines } from '../output';
import { addManagementOptions, answerFromPlane, type ManagementOptions } from '../principal';

interface ListOptions extends ManagementOptions, ControlPlaneOptions {
  readonly project: string;
  readonly state?: RunStatus;
  readonly cursor?: string;
  readonly limit?: number;
}

function parseLimit(text: string): number {
  if (!/^\d{1,3}$/.test(text) || Number(text) < 1 || Number(text) > RUN_LIST_PAGE_MAX)
    throw new InvalidArgumentError(`it must be a number of runs from 1 to ${RUN_LIST_PAGE_MAX}.`);
  return Number(text);
}

/** An epoch-ms time as the list shows it: ISO 8601 in UTC, the same instant the JSON's number is. */
export function isoText(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The job's own exit code, else the signal that ended it; null while it has not ended. */
export function exitText(exit: RunExit | null): string | number | null {
  return exit?.exitCode ?? exit?.signal ?? null;
}

/** Why the run ended where it was not the job's own doing: the stop's reason, or how its end was proved. */
export function reasonText(run: Pick<RunListItem, 'cancelReason' | 'exit'>): string | null {
  if (run.cancelReason !== null) return run.cancelReason;
  return run.exit === null || run.exit.cause === 'receipt' ? null : run.exit.cause;
}

export function listText(page: RunListPage): string {
  const filter = page.state === null ? '' : ` ${page.state}`;
  const header = `project ${page.projectId}: ${page.items.length}${filter} run(s) on this page, newest first`;
  const rows = page.items.map((run) => [
    run.runId,
    run.name,
    run.status,
    isoText(run.startedAtMs),
    isoText(run.endedAtMs),
    exitText(run.exit),
    reasonText(run),
  ]);
  const next =
    page.next === null ? 'last page' : `next page: pidfence list --project ${page.projectId} --cursor ${page.next}`;
  return (
    [header, ...tableLines(['run', 'name', 'state', 'started', 'ended', 'exit', 'reason'], rows), next].join('\n') +
    '\n'
  );
}

export const listCommand = oneShotCommand<ListOptions>(
  'list',
  'the runs of a project, newest first: name, state, start, end, exit status and reason (needs run.read)',
  (command) =>
    addControlPlaneOptions(addManagementOptions(command.alias('ps')))
      .option('--project <id>', 'the project', 'default')
      .option('--state <state>', `only runs in this state: ${RUN_STATUSES.join(', ')}`)
      .option('--limit <n>', `runs per page (1-${RUN_LIST_PAGE_MAX}, default ${RUN_LIST_PAGE_DEFAULT})`, parseLimit)
      .option('--cursor <next>', 'the `next` cursor of the previous page'),
  async (io, _arguments, options) => {
    const request = {
      projectId: options.project,
      ...(options.state === undefined ? {} : { state: options.state }),
      ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
      ...(options.limit === undefined ? {} : { limit: options.limit }),
    };
    const target = controlPlaneTarget(options, io.env);
    if (target === null) return await answerFromPlane(options, io, (plane) => plane.listRuns(request), listText);
    const { listOnCluster } = await import('../cluster-runs');
    writeAnswer(io, options.json, await listOnCluster(target, request), listText);
    return EXIT.ok;
  },
);
