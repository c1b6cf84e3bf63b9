// `pidfence grant <subject> <project> <permission>` (docs/decisions/0040): the owner's way to give or
// take (--revoke) a permission. The acting principal needs grants.write on the project, except for
// one --bootstrap grant of grants.write on a database that holds no grants at all.

import { PidfenceError, PidfenceRangeError } from '../../base/errors';
import { CLUSTER_SCOPE, validateGrantScope, validatePermission, validateSubject } from '../../contract/index';
import { auditActor, authorizeImpersonation, notPermitted, type Principal } from '../../management/index';
import type { GrantAdministration, GrantChange } from '../../store/management-store';
import { oneShotCommand, writeAnswer } from '../command';
import { EXIT } from '../exit-codes';
import {
  actingPrincipal,
  addManagementOptions,
  howToGetPermission,
  refusalInStore,
  requestedPrincipal,
  type ManagementOptions,
} from '../principal';
import { openGrantAdministration, resolveStoreTarget, type StoreTarget } from '../store-target';

interface GrantOptions extends ManagementOptions {
  readonly revoke?: boolean;
  readonly bootstrap?: boolean;
}

/** The runtime role cannot write grants (by design); say which connection can. */
function ownerOnly(error: unknown): unknown {
  if (error instanceof PidfenceError && error.code === 'ERR_PIDFENCE_STORE_PRIVILEGE') {
    return new PidfenceError(
      "this connection may not write grants: on PostgreSQL only the migration owner can. Pass the owner's URL with --db.",
      'ERR_PIDFENCE_GRANT_OWNER_ONLY',
    );
  }
  return error;
}

/** After the first grant, the way in is the store's own grant command (docs/decisions/0170). */
function bootstrapClosed(
  target: StoreTarget,
  env: NodeJS.ProcessEnv,
  subject: string,
  projectId: string,
): PidfenceError {
  return new PidfenceError(
    `this database already holds grants, so --bootstrap is closed: ${howToGetPermission(target, env, subject, projectId, 'grants.write')}.`,
    'ERR_PIDFENCE_BOOTSTRAP_CLOSED',
  );
}

async function authorizeGrant(
  admin: GrantAdministration,
  target: StoreTarget,
  env: NodeJS.ProcessEnv,
  actor: Principal,
  change: GrantChange,
  bootstrap: boolean,
): Promise<void> {
  const { projectId, permission } = change;
  if (!bootstrap) {
    if (!(await admin.hasPermission(actor.subject, projectId, 'grants.write')))
      throw notPermitted(actor.subject, 'grants.write', projectId);
    await authorizeImpersonation(admin, actor, projectId);
    return;
  }
  if (permission !== 'grants.write') {
    throw new PidfenceRangeError(
      '--bootstrap names the first administrator: it grants grants.write only; grant the rest as that subject.',
      'ERR_PIDFENCE_USAGE',
    );
  }
  if ((await admin.countGrants()) > 0) {
    throw bootstrapClosed(target, env, change.subject, projectId);
  }
}

export const grantCommand = oneShotCommand<GrantOptions, [string, string, string]>(
  'grant',
  'give (or --revoke) a permission: run.read, run.stop or grants.write on a project, worker.read or worker.manage on @cluster (needs grants.write there, or --bootstrap)',
  (command) =>
    addManagementOptions(command)
      .argument('<subject>', 'who receives the permission')
      .argument('<project>', `the project, or ${CLUSTER_SCOPE} for the worker permissions`)
      .argument('<permission>', 'run.read | run.stop | grants.write | worker.read | worker.manage')
      .option('--revoke', 'take the permission away instead')
      .option('--bootstrap', 'first grant on a database without grants: grants.write for the first administrator'),
  async (io, [subjectArg, projectArg, permissionArg], options) => {
    const permission = validatePermission(permissionArg);
    const change = {
      subject: validateSubject(subjectArg),
      projectId: validateGrantScope(projectArg, permission),
      permission,
    };
    const requested = requestedPrincipal(options.as, io.env);
    if (options.bootstrap === true && options.revoke === true)
      throw new PidfenceRangeError('--bootstrap and --revoke do not go together.', 'ERR_PIDFENCE_USAGE');
    const target = resolveStoreTarget(options.db, io.env);
    if (target.kind === 'sqlite' && change.projectId === CLUSTER_SCOPE) {
      throw new PidfenceRangeError(
        `${CLUSTER_SCOPE} is the scope of a cluster's workers, which only a PostgreSQL store has; pass the cluster's --db postgres://… (its migration owner).`,
        'ERR_PIDFENCE_GRANT_CLUSTER_ONLY',
      );
    }
    const admin = await openGrantAdministration(target, { create: options.bootstrap === true });
    try {
      const actor = actingPrincipal(requested, await admin.authenticatedSubject());
      await authorizeGrant(admin, target, io.env, actor, change, options.bootstrap === true);
      const by = auditActor(actor);
      const outcome = options.revoke === true ? await admin.revokeGrant(change) : await admin.writeGrant(change, by);
      writeAnswer(
        io,
        options.json,
        { ...change, outcome, by },
        () => `${change.subject} ${change.permission} on ${change.projectId}: ${outcome}\n`,
      );
      return EXIT.ok;
    } catch (error) {
      throw refusalInStore(target, io.env, ownerOnly(error));
    } finally {
      await admin.close();
    }
  },
);
