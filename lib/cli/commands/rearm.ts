// `pidfence rearm <runId> --expect-version <n> --expect-result <result>` (design/dispatch §5.1, gate 15): exact
// CAS from the blocked record you inspected to a retry due now (needs run.stop on the project).
import { InvalidArgumentError, type Command } from 'commander';

import { PidfenceRangeError } from '../../base/errors';
import type { BlockingResult } from '../../contract/index';
import type { CliCommand, CliIo } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import { addManagementOptions, withManagementPlane, type ManagementOptions } from '../principal';
import { inspectionText } from './inspect';

function parseVersion(text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new InvalidArgumentError('it must be the version number `pidfence inspect` showed.');
  return Number(text);
}

interface RearmOptions extends ManagementOptions {
  readonly expectVersion?: number;
  readonly expectResult?: string;
  readonly expectStatus: string;
}

export const rearmCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addManagementOptions(program.command('rearm'))
      .description('move a blocked dispatch back to a retry due now, if it is exactly as inspected (needs run.stop)')
      .argument('<runId>', 'the run')
      .option('--expect-version <n>', 'the dispatch version `pidfence inspect` showed (required)', parseVersion)
      .option('--expect-result <result>', 'the blocking result `pidfence inspect` showed (required)')
      .option('--expect-status <status>', 'the status you inspected; only blocked can be rearmed', 'blocked')
      .action(async (runId: string, options: RearmOptions) => {
        if (options.expectVersion === undefined || options.expectResult === undefined) {
          throw new PidfenceRangeError('--expect-version and --expect-result are required: copy them from `pidfence inspect <runId>`.', 'ERR_PIDFENCE_USAGE');
        }
        const expectation = { expectedVersion: options.expectVersion, expectedStatus: options.expectStatus as 'blocked', expectedResult: options.expectResult as BlockingResult };
        const inspection = await withManagementPlane(options, io, (plane) => plane.rearm(runId, expectation));
        if (options.json === true) writeJson(io, inspection);
        else io.stdout.write(inspectionText(inspection, `run ${inspection.runId} rearmed: its dispatch is due now`));
        done(EXIT.ok);
      });
  },
};
