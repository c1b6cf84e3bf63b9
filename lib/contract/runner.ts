// The runner contract (docs/decisions/0070): what a runner is (its host and the identity that
// proves it alive), how one runner takes over another's attempts, and the validators of those
// commands. The store interface that keeps them is lib/store/runner-store.ts.
import { PidfenceTypeError } from '../base/errors';
import { validateBoundedInteger, validateEnum, validateExactShape, validateId } from './validators';

export type RunnerKind = 'run' | 'supervise' | 'cancel';
export const RUNNER_KINDS: readonly RunnerKind[] = ['run', 'supervise', 'cancel'];

/** How the previous owner was proved gone (an adoption event's payload; no ids, no PID). */
export type AdoptionProof = 'ended' | 'exited' | 'pid_reused' | 'rebooted';
export const ADOPTION_PROOFS: readonly AdoptionProof[] = ['ended', 'exited', 'pid_reused', 'rebooted'];

/** A host id: the app-specific machine id, or what PIDFENCE_HOST_ID names. */
export const HOST_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** The runner identity JSON ({pid, bootId, startTicks, pidfsIno}) is under 200 bytes. */
export const RUNNER_IDENTITY_MAX_BYTES = 256;
export const ADOPTION_BATCH_MAX = 64;

export interface RunnerRecord {
  readonly runnerId: string;
  readonly hostId: string;
  readonly kind: RunnerKind;
  /** The runner process's identity, as JSON text: its liveness proof. */
  readonly identity: string;
  readonly startedAtMs: number;
  /** Set when the runner ended cleanly. */
  readonly endedAtMs: number | null;
}

export interface RegisterRunnerCommand {
  readonly runnerId: string;
  readonly hostId: string;
  readonly kind: RunnerKind;
  readonly identity: string;
}

export interface AdoptCommand {
  readonly fromRunnerId: string;
  readonly toRunnerId: string;
  readonly proof: AdoptionProof;
  /** Only this run's active attempt (a `cancel` that stops one orphan); omitted: all, up to the batch. */
  readonly runId?: string;
}

export function validateRegisterRunner(value: unknown): RegisterRunnerCommand {
  const input = validateExactShape(value, 'register-runner command', ['runnerId', 'hostId', 'kind', 'identity']);
  return {
    runnerId: validateId(input.runnerId, 'runnerId'),
    hostId: validateHostId(input.hostId),
    kind: validateEnum(input.kind, 'kind', RUNNER_KINDS, 'ERR_PIDFENCE_INVALID_RUNNER'),
    identity: validateRunnerIdentityText(input.identity),
  };
}

export function validateHostId(value: unknown): string {
  if (typeof value !== 'string' || !HOST_ID_PATTERN.test(value)) {
    throw new PidfenceTypeError(
      'the host id must be 1-64 letters, digits, dots, dashes or underscores; check PIDFENCE_HOST_ID.',
      'ERR_PIDFENCE_INVALID_HOST_ID',
    );
  }
  return value;
}

function validateRunnerIdentityText(value: unknown): string {
  if (typeof value !== 'string' || Buffer.byteLength(value) > RUNNER_IDENTITY_MAX_BYTES) {
    throw new PidfenceTypeError(
      `the runner identity must be JSON text of at most ${RUNNER_IDENTITY_MAX_BYTES} bytes.`,
      'ERR_PIDFENCE_INVALID_RUNNER',
    );
  }
  return value;
}

export function validateAdoptCommand(value: unknown): AdoptCommand {
  const input = validateExactShape(value, 'adopt command', ['fromRunnerId', 'toRunnerId', 'proof'], ['runId']);
  const command = {
    fromRunnerId: validateId(input.fromRunnerId, 'fromRunnerId'),
    toRunnerId: validateId(input.toRunnerId, 'toRunnerId'),
    proof: validateEnum(input.proof, 'proof', ADOPTION_PROOFS, 'ERR_PIDFENCE_INVALID_RUNNER'),
  };
  return input.runId === undefined ? command : { ...command, runId: validateId(input.runId, 'runId') };
}

export function validateCandidatesQuery(value: unknown): { hostId: string; excludeRunnerId: string; limit: number } {
  const input = validateExactShape(value, 'adoption candidates query', ['hostId', 'excludeRunnerId', 'limit']);
  return {
    hostId: validateHostId(input.hostId),
    excludeRunnerId: validateId(input.excludeRunnerId, 'excludeRunnerId'),
    limit: validateBoundedInteger(input.limit, 'limit', 1, ADOPTION_BATCH_MAX, 'ERR_PIDFENCE_INVALID_PAGE_LIMIT'),
  };
}
