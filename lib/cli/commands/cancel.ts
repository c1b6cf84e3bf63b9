// `pidfence cancel RUN`: durable user cancel intent (time, reason and `run.cancel_requested` in one
// transaction). The runner that owns the job (`pidfence run` or `supervise`) stops the exact process
// through the dispatch path; an existing intent is kept as it is.
import { randomUUID } from 'node:crypto';

import type { Command } from 'commander';

import { validateId } from '../../contract/index';
import { storeOptionsAdd, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { storeOpen, storeTargetResolve } from '../store-target';

async function cancelAction(runIdText: string, options: StoreOptions, io: CliIo): Promise<ExitCode> {
  const runId = validateId(runIdText, 'RUN');
  const store = await storeOpen(storeTargetResolve(options.db, io.env));
  try {
    const outcome = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
    const facts = outcome.kind === 'requested' || outcome.kind === 'already_requested'
      ? { runId, result: outcome.kind, reason: outcome.run.cancelReason, status: outcome.run.status }
      : { runId, result: outcome.kind };
    if (options.json === true) {
      io.stdout.write(`${JSON.stringify(facts)}\n`);
    } else if (outcome.kind === 'requested') {
      io.stdout.write(`cancel requested for ${runId}; its runner stops the job\n`);
    } else if (outcome.kind === 'already_requested') {
      io.stdout.write(`${runId} already has a cancel request (${outcome.run.cancelReason ?? 'unknown'}); kept as it is\n`);
    } else {
      io.stderr.write(`pidfence: ${runId} ${outcome.kind === 'run_missing' ? 'does not exist in this store' : 'has already finished'}\n`);
    }
    return outcome.kind === 'requested' || outcome.kind === 'already_requested' ? EXIT.ok : EXIT.refused;
  } finally {
    await store.close();
  }
}

export const cancelCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    storeOptionsAdd(program.command('cancel'))
      .description('request the cancellation of a run (durable; its runner stops the exact process)')
      .argument('<run>', 'the run id printed by `pidfence run`')
      .action(async (run: string, options: StoreOptions) => {
        done(await cancelAction(run, options, io));
      });
  },
};
