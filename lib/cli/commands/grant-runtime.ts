// `pidfence grant-runtime <role> --db <owner-url>`: gives an existing LOGIN role exactly the runtime
// privileges (revoking any other direct table grant) and checks readiness for it (docs/decisions/0048).
import type { Command } from 'commander';

import { PidfenceRangeError } from '../../base/errors';
import { addStoreOptions, type CliCommand, type CliIo, type StoreOptions } from '../command';
import { EXIT, type ExitCode } from '../exit-codes';
import { writeJson } from '../output';
import { resolveStoreTarget } from '../store-target';

export const grantRuntimeCommand: CliCommand = {
  register(program: Command, io: CliIo, done: (code: ExitCode) => void): void {
    addStoreOptions(program.command('grant-runtime'))
      .description('PostgreSQL: give a LOGIN role exactly the runtime privileges, then check it is ready (with the owner\'s URL)')
      .argument('<role>', 'the runtime role (create it first: CREATE ROLE name LOGIN PASSWORD ...)')
      .action(async (role: string, options: StoreOptions) => {
        const target = resolveStoreTarget(options.db, io.env);
        if (target.kind !== 'postgres') {
          throw new PidfenceRangeError('grant-runtime is for PostgreSQL: pass the migration owner\'s postgres:// URL with --db. A SQLite file has no roles.', 'ERR_PIDFENCE_USAGE');
        }
        const { grantRuntime, postgresReadiness } = await import('../../store/postgres/index');
        await grantRuntime(target.url, role);
        const readiness = await postgresReadiness(target.url, { runtimeRole: role });
        if (options.json === true) writeJson(io, readiness);
        else io.stdout.write(`${readiness.runtimeRole} holds exactly the runtime privileges on schema ${readiness.schema} (schema version ${readiness.schemaVersion}); connect runners with its URL\n`);
        done(EXIT.ok);
      });
  },
};
