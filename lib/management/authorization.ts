// Authorization of the management plane (ADR-0458, gate 14; docs/decisions/0040): a principal is a
// subject holding per-project permissions stored in the database. Every call checks them; the
// local CLI operator is a configured principal like any other, never a bypass.
import { validateSubject, type Permission } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { ManagementError } from './errors';

export function notPermitted(subject: string, permission: Permission, projectId: string): ManagementError {
  return new ManagementError(
    `${subject} does not hold ${permission} on project ${projectId}; ask a holder of grants.write on it to run \`pidfence grant ${subject} ${projectId} ${permission}\`.`,
    'ERR_PIDFENCE_NOT_PERMITTED',
  );
}

/** The acting principal, validated once. */
export interface Principal {
  readonly subject: string;
}

export function principalOf(subject: unknown): Principal {
  return { subject: validateSubject(subject) };
}

/** Throws ERR_PIDFENCE_NOT_PERMITTED unless the grants table says the subject holds the permission. */
export async function authorize(store: Pick<ManagementStore, 'hasPermission'>, principal: Principal, projectId: string, permission: Permission): Promise<void> {
  if (!(await store.hasPermission(principal.subject, projectId, permission))) throw notPermitted(principal.subject, permission, projectId);
}
