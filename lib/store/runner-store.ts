// The runner store (docs/decisions/0070): the runners of a store, each with the host it runs on
// and the identity that proves it alive, and the one owner of every attempt. A runner acts only on
// the attempts it owns; it takes over another runner's attempts only when that runner is proved
// gone, on the same host, and each takeover is an `attempt.adopted` event.
import { PidfenceTypeError } from '../base/errors';
import { validateBoundedInteger, validateEnum, validateExactShape, validateId } from '../contract/index';

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

export interface RunnerStore {
  registerRunner(command: RegisterRunnerCommand): Promise<void>;
  /** The runner ended cleanly; idempotent. */
  endRunner(runnerId: string): Promise<void>;
  /** The owner of a run's active attempt: null when the run has no active attempt. */
  activeAttemptOwner(runId: string): Promise<{ readonly attemptId: string; readonly runner: RunnerRecord | null } | null>;
  /** Other runners of this host that still own active attempts, at most `limit`. */
  adoptionCandidates(query: { readonly hostId: string; readonly excludeRunnerId: string; readonly limit: number }): Promise<RunnerRecord[]>;
  /**
   * Moves up to ADOPTION_BATCH_MAX active attempts from one runner to another, each with an
   * `attempt.adopted` event, in one transaction; only attempts still owned by `fromRunnerId` move.
   */
  adoptAttempts(command: AdoptCommand): Promise<number>;
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
    throw new PidfenceTypeError('the host id must be 1-64 letters, digits, dots, dashes or underscores; check PIDFENCE_HOST_ID.', 'ERR_PIDFENCE_INVALID_HOST_ID');
  }
  return value;
}

function validateRunnerIdentityText(value: unknown): string {
  if (typeof value !== 'string' || Buffer.byteLength(value) > RUNNER_IDENTITY_MAX_BYTES) {
    throw new PidfenceTypeError(`the runner identity must be JSON text of at most ${RUNNER_IDENTITY_MAX_BYTES} bytes.`, 'ERR_PIDFENCE_INVALID_RUNNER');
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
