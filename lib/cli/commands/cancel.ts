// `pidfence cancel RUN`: durable user cancel intent (time, reason and `run.cancel_requested` in one
// transaction); an existing intent is kept as it is. The runner that owns the job stops the exact
// process through the dispatch path. When that runner is proved gone (docs/decisions/0070), cancel
// takes the job over on this host and stops it itself, through the same claim and dispatch path.
import { randomUUID } from 'node:crypto';

import { validateId, type RequestCancellationOutcome } from '../../contract/index';
import type { OrphanStop } from '../../execution/adoption';
import { resolveHostId } from '../../execution/host-id';
import { sendWakeUp, wakeHeard } from '../../execution/wake-channel';
import { authorizeCancel, runFinished, runNotVisible } from '../../management/index';
import { type CliIo, oneShotCommand } from '../command';
import { addControlPlaneOptions, controlPlaneTarget, type ControlPlaneOptions } from '../control-plane-target';
import { openExecutionTarget, wakeDirectoryOf } from '../execution-target';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import {
  actingPrincipal,
  addManagementOptions,
  nameStoreInRefusal,
  requestedPrincipal,
  type ManagementOptions,
} from '../principal';
import { openStore, resolveStoreTarget, type StoreTarget } from '../store-target';

/** A cancel that stops an orphan gives its drain this long; then supervise finishes the job. */
const ORPHAN_DRAIN_MS = 2_000;

async function stopIfOrphaned(target: StoreTarget, runId: string, io: CliIo): Promise<OrphanStop> {
  // Loaded only here: a cancel whose runner listens never needs the execution application.
  const { createExecution } = await import('../../execution/application');
  const execution = await openExecutionTarget(target, io.env);
  const app = createExecution({
    stores: execution.stores,
    receiptDirectory: execution.receiptDirectory,
    runnerKind: 'cancel',
    env: io.env,
    drainTimeoutMs: ORPHAN_DRAIN_MS,
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
    case 'owner_other_namespace':
      return `cancel requested for ${runId}; its runner runs in another PID namespace (a container or \`unshare --pid\`), where the job's process ids belong: it stops the job if it is alive, else run \`pidfence cancel ${runId}\` or \`pidfence supervise\` inside that namespace`;
    case 'owner_unknown':
      return `cancel requested for ${runId}; no runner is recorded for it: run \`pidfence supervise\` on the host that started it`;
    default:
      return `cancel requested for ${runId}; its runner stops the job`;
  }
}

/**
 * The runner that owns the run's active attempt, when one is recorded and has not ended: the one to
 * wake; and the host of the recorded owner, read right after the request committed.
 */
type Requested = RequestCancellationOutcome & {
  readonly ownerRunnerId: string | null;
  readonly ownerHostId: string | null;
};

/** Durable user intent, after run.stop on the run's project (docs/decisions/0043); another project's run looks missing. */
async function requestCancel(target: StoreTarget, runId: string, requested: string | undefined): Promise<Requested> {
  // A cancel never creates a store: a wrong directory must not answer "no such run" from a new file.
  const store = await openStore(target, { create: false });
  try {
    const principal = actingPrincipal(requested, await store.authenticatedSubject());
    await authorizeCancel(store.managementStore, principal, runId, await store.runStore.getRun(runId));
    const outcome = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
    if (outcome.kind === 'run_missing') throw runNotVisible(runId);
    if (outcome.kind !== 'requested' && outcome.kind !== 'already_requested')
      return { ...outcome, ownerRunnerId: null, ownerHostId: null };
    const owner = await store.runnerStore.activeAttemptOwner(runId);
    return {
      ...outcome,
      ownerHostId: owner?.runner?.hostId ?? null,
      ownerRunnerId:
        owner?.runner !== null && owner?.runner !== undefined && owner.runner.endedAtMs === null
          ? owner.runner.runnerId
          : null,
    };
  } finally {
    await store.close();
  }
}

/**
 * A job owned on another host is that host's to stop (docs/decisions/0070, 0386): answered from the
 * owner read at the request, not from a later read that its runner may already have settled.
 */
function ownerStop(target: StoreTarget, requested: Requested, runId: string, io: CliIo): Promise<OrphanStop> {
  if (requested.ownerHostId !== null && requested.ownerHostId !== resolveHostId(io.env)) {
    return Promise.resolve({ kind: 'owner_elsewhere' });
  }
  return stopIfOrphaned(target, runId, io);
}

async function cancelAction(runIdText: string, options: ManagementOptions, io: CliIo): Promise<ExitCode> {
  const runId = validateId(runIdText, 'RUN');
  const requested = requestedPrincipal(options.as, io.env);
  const target = resolveStoreTarget(options.db, io.env);
  const outcome = await nameStoreInRefusal(target, io.env, requestCancel(target, runId, requested));
  if (outcome.kind !== 'requested' && outcome.kind !== 'already_requested') {
    throw runFinished(runId);
  }
  // After the commit: wake the owner so it runs its cycle now (docs/decisions/0175). A runner that
  // listens is alive, and stops the job; any other answer leaves the proof to stopIfOrphaned.
  const woken =
    outcome.ownerRunnerId !== null &&
    wakeHeard(await sendWakeUp(wakeDirectoryOf(target, io.env), outcome.ownerRunnerId));
  const stop: OrphanStop = woken ? { kind: 'owner_alive' } : await ownerStop(target, outcome, runId, io);
  if (options.json === true) {
    writeJson(io, {
      runId,
      result: outcome.kind,
      reason: outcome.run.cancelReason,
      status: outcome.run.status,
      runner: stop.kind,
    });
  } else if (outcome.kind === 'already_requested' && stop.kind === 'owner_alive') {
    io.stdout.write(
      `${runId} already has a cancel request (${outcome.run.cancelReason ?? 'unknown'}); kept as it is\n`,
    );
  } else {
    io.stdout.write(`${orphanSentence(runId, stop)}\n`);
  }
  return EXIT.ok;
}

export const cancelCommand = oneShotCommand<ManagementOptions & ControlPlaneOptions, [string]>(
  'cancel',
  'request the cancellation of a run (needs run.stop; durable; its runner stops the exact process, or this command does when that runner is gone)',
  (command) =>
    addControlPlaneOptions(addManagementOptions(command)).argument('<run>', 'the run id printed by `pidfence run`'),
  async (io, [run], options) => {
    const target = controlPlaneTarget(options, io.env);
    if (target === null) return cancelAction(run, options, io);
    return (await import('../cluster-runs')).cancelOnCluster(target, run, options.json, io);
  },
);
