// `pidfence show RUN` (docs/decisions/0140): one run with its attempts, events, cancellation
// dispatch and exit. Needs run.read on the run's project; another project's run answers exactly
// like a missing one. Never a PID, handle, command or environment.

import type { RunDetail, RunEventView } from '../../management/index';
import { oneShotCommand } from '../command';
import { addControlPlaneOptions, controlPlaneTarget, type ControlPlaneOptions } from '../control-plane-target';
import { EXIT } from '../exit-codes';
import { factLines, writeJson, tableLines, timeText } from '../output';
import { addManagementOptions, withManagementPlane, type ManagementOptions } from '../principal';
import { inspectionText } from './inspect';
import { exitText, isoText, reasonText } from './list';

/** An event's payload facts as `key=value` pairs, in the order the event gives them. */
function detailText(event: RunEventView): string {
  return Object.entries(event.detail)
    .map(([key, value]) => `${key}=${value === null ? '-' : String(value)}`)
    .join(' ');
}

/** The run's events and its attempts' events as one story; a run event goes first at the same instant. */
function eventsInTimeOrder(run: RunDetail): RunEventView[] {
  const tagged = [
    ...run.events.map((event) => ({ event, attempt: 0 })),
    ...run.attempts.flatMap((attempt) => attempt.events.map((event) => ({ event, attempt: 1 }))),
  ];
  return tagged
    .sort((a, b) => a.event.createdAtMs - b.event.createdAtMs || a.attempt - b.attempt)
    .map(({ event }) => event);
}

/**
 * Said only when a `keep` was chosen (docs/decisions/0302): what the job left behind lives on after
 * its end, and its cgroup with it; the default, stopping them, needs no line.
 */
function keptFact(run: RunDetail): Array<[string, string]> {
  const kept = run.attempts.filter((attempt) => attempt.leftovers === 'keep').map((attempt) => attempt.attemptId);
  return kept.length === 0
    ? []
    : [['leftovers', `keep: what the job left behind was left running at its end (${kept.join(', ')})`]];
}

export function showText(run: RunDetail): string {
  const events = eventsInTimeOrder(run);
  const lines = [
    `run ${run.runId} (project ${run.projectId}): ${run.status}`,
    factLines([
      ['name', run.name],
      ['state', run.status],
      ['created', timeText(run.createdAtMs)],
      ['started', timeText(run.startedAtMs)],
      ['ended', timeText(run.endedAtMs)],
      ['exit code', run.exit?.exitCode ?? null],
      ['signal', run.exit?.signal ?? null],
      ['ended by', run.exit?.cause ?? null],
      ['reason', reasonText(run)],
      ['cancel requested', timeText(run.cancelRequestedAtMs)],
      ...keptFact(run),
    ]),
    `attempts (${run.attempts.length}${run.attemptsTruncated ? ', more not shown' : ''})`,
    ...tableLines(
      ['attempt', 'state', 'created', 'deadline', 'exit', 'ended by', 'containment'],
      run.attempts.map((attempt) => [
        attempt.attemptId,
        attempt.status,
        isoText(attempt.createdAtMs),
        isoText(attempt.deadlineAtMs),
        exitText(attempt.exit),
        attempt.exit?.cause ?? null,
        attempt.containment,
      ]),
    ),
    `events in time order (${events.length}${run.eventsTruncated ? ', later run events not shown' : ''})`,
    ...tableLines(
      ['time', 'type', 'detail'],
      events.map((event) => [isoText(event.createdAtMs), event.type, detailText(event)]),
    ),
  ];
  const dispatch =
    run.dispatch === null
      ? 'dispatch: none (no stop was claimed for this run)\n'
      : inspectionText(run.dispatch, 'dispatch');
  return `${lines.join('\n')}\n${dispatch}`;
}

export const showCommand = oneShotCommand<ManagementOptions & ControlPlaneOptions, [string]>(
  'show',
  'one run: state, times, exit status, attempts, events and cancellation dispatch (needs run.read)',
  (command) => addControlPlaneOptions(addManagementOptions(command)).argument('<run>', 'the run id'),
  async (io, [runId], options) => {
    const target = controlPlaneTarget(options, io.env);
    const run =
      target === null
        ? await withManagementPlane(options, io, (plane) => plane.showRun(runId))
        : await (await import('../cluster-runs')).showOnCluster(target, runId);
    if (options.json === true) writeJson(io, run);
    else io.stdout.write(showText(run));
    return EXIT.ok;
  },
);
