// `pidfence grant-runtime <role> --db <owner-url>`: gives an existing LOGIN role exactly the runtime
// privileges (revoking any other direct table grant) and checks readiness for it (docs/decisions/0048).

import { PidfenceRangeError } from '../../base/errors';
import { addStoreOptions, oneShotCommand, writeAnswer, type StoreOptions } from '../command';
import { EXIT } from '../exit-codes';
import { resolveStoreTarget } from '../store-target';

export const grantRuntimeCommand = oneShotCommand<StoreOptions, [string]>(
  'grant-runtime',
  "PostgreSQL: give a LOGIN role exactly the runtime privileges, then check it is ready (with the owner's URL)",
  (command) =>
    addStoreOptions(command).argument(
      '<role>',
      'the runtime role (create it first: CREATE ROLE name LOGIN PASSWORD ...)',
    ),
  async (io, [role], options) => {
    const target = resolveStoreTarget(options.db, io.env);
    if (target.kind !== 'postgres') {
      throw new PidfenceRangeError(
        "grant-runtime is for PostgreSQL: pass the migration owner's postgres:// URL with --db. A SQLite file has no roles.",
        'ERR_PIDFENCE_USAGE',
      );
    }
    const { grantRuntime, postgresReadiness } = await import('../../store/postgres/index');
    await grantRuntime(target.url, role);
    const readiness = await postgresReadiness(target.url, { runtimeRole: role });
    writeAnswer(
      io,
      options.json,
      readiness,
      () =>
        `${readiness.runtimeRole} holds exactly the runtime privileges on schema ${readiness.schema} (schema version ${readiness.schemaVersion}); connect runners with its URL\n`,
    );
    return EXIT.ok;
  },
);
