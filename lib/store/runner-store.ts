// The runner store (docs/decisions/0070): the runners of a store, each with the host it runs on
// and the identity that proves it alive, and the one owner of every attempt. A runner acts only on
// the attempts it owns; it takes over another runner's attempts only when that runner is proved
// gone, on the same host, and each takeover is an `attempt.adopted` event.
import type { AdoptCommand, RegisterRunnerCommand, RunnerRecord } from '../contract/index';

export interface RunnerStore {
  registerRunner(command: RegisterRunnerCommand): Promise<void>;
  /** The runner ended cleanly; idempotent. */
  endRunner(runnerId: string): Promise<void>;
  /** The owner of a run's active attempt: null when the run has no active attempt. */
  activeAttemptOwner(
    runId: string,
  ): Promise<{ readonly attemptId: string; readonly runner: RunnerRecord | null } | null>;
  /** Other runners of this host that still own active attempts, at most `limit`. */
  adoptionCandidates(query: {
    readonly hostId: string;
    readonly excludeRunnerId: string;
    readonly limit: number;
  }): Promise<RunnerRecord[]>;
  /**
   * Moves up to ADOPTION_BATCH_MAX active attempts from one runner to another, each with an
   * `attempt.adopted` event, in one transaction; only attempts still owned by `fromRunnerId` move.
   */
  adoptAttempts(command: AdoptCommand): Promise<number>;
}
