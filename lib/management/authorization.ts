// Authorization of the management plane (design/dispatch §5.1, gate 14; docs/decisions/0040): a principal is a
// subject holding per-project permissions stored in the database. Every call checks them; the
// local CLI operator is a configured principal like any other, never a bypass.
import { PidfenceRangeError } from '../base/errors';
import { OWNER_MAX_LENGTH, validateSubject, type Permission } from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { ManagementError } from './errors';

/** The default way to get a permission; a caller that knows the store (the CLI) names the exact command. */
function askAHolder(subject: string, permission: Permission, projectId: string): string {
  return `ask a holder of grants.write on it to run \`pidfence grant ${subject} ${projectId} ${permission}\``;
}

/** A readable request without the permission it needs; `howToGet` ends the sentence with a command that gives it. */
export class NotPermittedError extends ManagementError {
  readonly subject: string;
  readonly permission: Permission;
  readonly projectId: string;

  constructor(
    subject: string,
    permission: Permission,
    projectId: string,
    howToGet: string = askAHolder(subject, permission, projectId),
  ) {
    super(`${subject} does not hold ${permission} on project ${projectId}; ${howToGet}.`, 'ERR_PIDFENCE_NOT_PERMITTED');
    this.subject = subject;
    this.permission = permission;
    this.projectId = projectId;
  }

  /** The same refusal, ending in the store's own way to get the permission. */
  withHowToGet(howToGet: string): NotPermittedError {
    return new NotPermittedError(this.subject, this.permission, this.projectId, howToGet);
  }
}

export function notPermitted(subject: string, permission: Permission, projectId: string): NotPermittedError {
  return new NotPermittedError(subject, permission, projectId);
}

/**
 * The acting principal, validated once: `subject` is whose grants decide; `authenticated`, when it
 * differs, is who really asked (docs/decisions/0044) and must hold grants.write on the project.
 */
export interface Principal {
  readonly subject: string;
  readonly authenticated?: string;
}

export function principalOf(subject: unknown, authenticated?: unknown): Principal {
  const checked = validateSubject(subject);
  if (authenticated === undefined || authenticated === checked) return { subject: checked };
  const real = validateSubject(authenticated);
  if (auditActorOf(real, checked).length > OWNER_MAX_LENGTH) {
    throw new PidfenceRangeError(
      `"${real} acting as ${checked}" is longer than ${OWNER_MAX_LENGTH} characters, the audit's limit; act as a shorter subject.`,
      'ERR_PIDFENCE_INVALID_SUBJECT',
    );
  }
  return { subject: checked, authenticated: real };
}

function auditActorOf(authenticated: string, subject: string): string {
  return `${authenticated} acting as ${subject}`;
}

/** The audit's actor: the subject, or "A acting as B" when A acts as B. */
export function auditActor(principal: Principal): string {
  return principal.authenticated === undefined
    ? principal.subject
    : auditActorOf(principal.authenticated, principal.subject);
}

/** Acting as another subject is an administrator's act: grants.write on the project, held by the real caller. */
export async function authorizeImpersonation(
  store: Pick<ManagementStore, 'hasPermission'>,
  principal: Principal,
  projectId: string,
): Promise<void> {
  if (principal.authenticated === undefined) return;
  if (!(await store.hasPermission(principal.authenticated, projectId, 'grants.write'))) {
    throw new ManagementError(
      `${principal.authenticated} may not act as ${principal.subject} here: acting as another subject (--as, $PIDFENCE_PRINCIPAL) needs grants.write on the project. Drop --as to act as yourself.`,
      'ERR_PIDFENCE_IMPERSONATION_REFUSED',
    );
  }
}

/** Throws ERR_PIDFENCE_NOT_PERMITTED unless the grants table says the subject holds the permission. */
export async function authorize(
  store: Pick<ManagementStore, 'hasPermission'>,
  principal: Principal,
  projectId: string,
  permission: Permission,
): Promise<void> {
  if (!(await store.hasPermission(principal.subject, projectId, permission)))
    throw notPermitted(principal.subject, permission, projectId);
  await authorizeImpersonation(store, principal, projectId);
}
