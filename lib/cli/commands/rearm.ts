// `pidfence rearm <runId> --expect-version <n> --expect-result <result>` (design/dispatch §5.1, gate 15): exact
// CAS from the blocked record you inspected to a retry due now (needs run.stop on the project).
import { InvalidArgumentError } from 'commander';

import { PidfenceRangeError } from '../../base/errors';
import type { BlockingResult } from '../../contract/index';
import { oneShotCommand } from '../command';
import { addManagementOptions, answerFromPlane, type ManagementOptions } from '../principal';
import { inspectionText } from './inspect';

function parseVersion(text: string): number {
  if (!/^\d{1,15}$/.test(text))
    throw new InvalidArgumentError('it must be the version number `pidfence inspect` showed.');
  return Number(text);
}

interface RearmOptions extends ManagementOptions {
  readonly expectVersion?: number;
  readonly expectResult?: string;
  readonly expectStatus: string;
}

export const rearmCommand = oneShotCommand<RearmOptions, [string]>(
  'rearm',
  'move a blocked dispatch back to a retry due now, if it is exactly as inspected (needs run.stop)',
  (command) =>
    addManagementOptions(command)
      .argument('<runId>', 'the run')
      .option('--expect-version <n>', 'the dispatch version `pidfence inspect` showed (required)', parseVersion)
      .option('--expect-result <result>', 'the blocking result `pidfence inspect` showed (required)')
      .option('--expect-status <status>', 'the status you inspected; only blocked can be rearmed', 'blocked'),
  async (io, [runId], options) => {
    if (options.expectVersion === undefined || options.expectResult === undefined) {
      throw new PidfenceRangeError(
        '--expect-version and --expect-result are required: copy them from `pidfence inspect <runId>`.',
        'ERR_PIDFENCE_USAGE',
      );
    }
    const expectation = {
      expectedVersion: options.expectVersion,
      expectedStatus: options.expectStatus as 'blocked',
      expectedResult: options.expectResult as BlockingResult,
    };
    return await answerFromPlane(
      options,
      io,
      (plane) => plane.rearm(runId, expectation),
      (inspection) => inspectionText(inspection, `run ${inspection.runId} rearmed: its dispatch is due now`),
      undefined,
      'write',
    );
  },
);
