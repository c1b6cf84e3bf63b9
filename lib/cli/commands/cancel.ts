// `pidfence cancel RUN`: durable user cancel intent (time, reason and `run.cancel_requested` in one
// transaction); an existing intent is kept as it is. The runner that owns the job stops the exact
// process through the dispatch path. When that runner is proved gone (docs/decisions/0070), cancel
// takes the job over on this host and stops it itself, through the same claim and dispatch path.
import { randomUUID } from 'node:crypto';


import { validateId, type RequestCancellationOutcome } from '../../contract/index';
import { createExecution, type OrphanStop } from '../../execution/index';
import { authorizeCancel, ManagementError, runNotVisible } from '../../management/index';
import { type CliIo, oneShotCommand } from '../command';
import { openExecutionTarget } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import { actingPrincipal, addManagementOptions, nameStoreInRefusal, requestedPrincipal, type ManagementOptions } from '../principal';
import { openStore, resolveStoreTarget, type StoreTarget } from '../store-target';

/** A cancel that stops an orphan gives its drain this long; then supervise finishes the job. */
const ORPHAN_DRAIN_MS = 2_000;

async function stopIfOrphaned(target: StoreTarget, runId: string, io: CliIo): Promise<OrphanStop> {
  const execution = await openExecutionTarget(target, io.env);
  const app = createExecution({
    stores: execution.stores, receiptDirectory: execution.receiptDirectory, runnerKind: 'cancel', env: io.env, drainTimeoutMs: ORPHAN_DRAIN_MS,
  });
  try {
    return await app.stopOrphan(runId);
  } finally {
    await app.drain();
  }
}

function orphanSentence(runId: string, stop: OrphanStop): string {
  switch (stop.kind) {
    case 'stopped':
      return `cancel requested for ${runId}; its runner was gone, so this command stopped the job itself (${stop.outcome.kind === 'completed' || stop.outcome.kind === 'terminal' ? stop.outcome.status : 'ended'})`;
    case 'stopping':
      return `cancel requested for ${runId}; its runner was gone and the stop is still under way; \`pidfence supervise\` on this host finishes it`;
    case 'owner_elsewhere':
      return `cancel requested for ${runId}; its runner on another host stops the job`;
    case 'owner_unknown':
      return `cancel requested for ${runId}; no runner is recorded for it: run \`pidfence supervise\` on the host that started it`;
    default:
      return `cancel requested for ${runId}; its runner stops the job`;
  }
}

/** Durable user intent, after run.stop on the run's project (docs/decisions/0043); another project's run looks missing. */
async function requestCancel(target: StoreTarget, runId: string, requested: string | undefined): Promise<RequestCancellationOutcome> {
  // A cancel never creates a store: a wrong directory must not answer "no such run" from a new file.
  const store = await openStore(target, { create: false });
  try {
    const principal = actingPrincipal(requested, await store.authenticatedSubject());
    await authorizeCancel(store.managementStore, principal, runId, await store.runStore.getRun(runId));
    const outcome = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
    if (outcome.kind === 'run_missing') throw runNotVisible(runId);
    return outcome;
  } finally {
    await store.close();
  }
}

async function cancelAction(runIdText: string, options: ManagementOptions, io: CliIo): Promise<ExitCode> {
  const runId = validateId(runIdText, 'RUN');
  const requested = requestedPrincipal(options.as, io.env);
  const target = resolveStoreTarget(options.db, io.env);
  const outcome = await nameStoreInRefusal(target, requestCancel(target, runId, requested));
  if (outcome.kind !== 'requested' && outcome.kind !== 'already_requested') {
    throw new ManagementError(`run ${runId} has already finished; nothing to cancel.`, 'ERR_PIDFENCE_RUN_FINISHED');
  }
  const stop = await stopIfOrphaned(target, runId, io);
  if (options.json === true) {
    writeJson(io, { runId, result: outcome.kind, reason: outcome.run.cancelReason, status: outcome.run.status, runner: stop.kind });
  } else if (outcome.kind === 'already_requested' && stop.kind === 'owner_alive') {
    io.stdout.write(`${runId} already has a cancel request (${outcome.run.cancelReason ?? 'unknown'}); kept as it is\n`);
  } else {
    io.stdout.write(`${orphanSentence(runId, stop)}\n`);
  }
  return EXIT.ok;
}

export const cancelCommand = oneShotCommand<ManagementOptions, [string]>(
  'cancel',
  'request the cancellation of a run (needs run.stop; durable; its runner stops the exact process, or this command does when that runner is gone)',
  (command) => addManagementOptions(command)
    .argument('<run>', 'the run id printed by `pidfence run`'),
  (io, [run], options) => cancelAction(run, options, io),
);
