// rearm(runId, expectation) (design/dispatch §5.1, gates 14-15): exact CAS from the blocked record the caller
// inspected to a retry_wait due at the store's now, with its RunEvent and audit row in one
// transaction. run.stop is checked first and again inside the transaction (authorization drift).
import { randomUUID } from 'node:crypto';

import {
  validateId,
  validateRearmExpectation,
  type DispatchInspection,
  type RearmExpectation,
  type RearmOutcome,
} from '../contract/index';
import type { ManagementStore } from '../store/management-store';
import { auditActor, notPermitted, type Principal } from './authorization';
import { ManagementError } from './errors';
import { authorizeRun, runNotVisible } from './visibility';

/** TEST ONLY: runs between the up-front check and the rearm transaction (drift and race tests). */
export interface RearmTestHooks {
  afterAuthorization?(): Promise<void>;
}

function refusal(
  outcome: Exclude<RearmOutcome, { kind: 'rearmed' }>,
  runId: string,
  subject: string,
  projectId: string,
  expectation: RearmExpectation,
): Error {
  switch (outcome.kind) {
    case 'not_found':
      return runNotVisible(runId, 'dispatch');
    case 'not_permitted':
      return notPermitted(subject, 'run.stop', projectId);
    case 'stale_version':
      return new ManagementError(
        `run ${runId}'s dispatch is at version ${outcome.version}, not ${expectation.expectedVersion}: it changed since you inspected it. Inspect it again and decide on the current facts; nothing was written.`,
        'ERR_PIDFENCE_REARM_STALE',
      );
    case 'not_blocked':
      return new ManagementError(
        `run ${runId}'s dispatch is ${outcome.status}, not blocked: only a blocked dispatch can be rearmed. Nothing was written.`,
        'ERR_PIDFENCE_REARM_NOT_BLOCKED',
      );
    case 'result_mismatch':
      return new ManagementError(
        `run ${runId}'s dispatch was blocked by ${outcome.lastResult ?? 'nothing'}, not ${expectation.expectedResult}: inspect it again and pass the result you diagnosed. Nothing was written.`,
        'ERR_PIDFENCE_REARM_RESULT_MISMATCH',
      );
  }
}

export async function rearmDispatch(
  store: ManagementStore,
  principal: Principal,
  runId: string,
  expectation: RearmExpectation,
  hooks: RearmTestHooks = {},
): Promise<DispatchInspection> {
  const id = validateId(runId, 'runId');
  const expected = validateRearmExpectation(expectation);
  const before = await store.inspectDispatch(id);
  await authorizeRun(store, principal, id, before?.projectId ?? null, 'run.stop', 'dispatch');
  if (before === null) throw runNotVisible(id, 'dispatch');
  await hooks.afterAuthorization?.();
  const outcome = await store.rearm({
    runId: id,
    subject: principal.subject,
    actor: auditActor(principal),
    expectedVersion: expected.expectedVersion,
    expectedResult: expected.expectedResult,
    eventId: `evt-rearm-${randomUUID()}`,
    auditId: `audit-${randomUUID()}`,
  });
  if (outcome.kind !== 'rearmed') throw refusal(outcome, id, principal.subject, before.projectId, expected);
  return outcome.inspection;
}
