// Taking over the attempts of a runner that is proved gone (docs/decisions/0070): only on the same
// host, only on proof (a clean end, an exit, a reused PID, another boot), each attempt moved by a
// CAS on its old owner with an `attempt.adopted` event. A `cancel` whose run's runner is gone takes
// over just that run and stops it through the same claim/dispatch path a runner uses.
import { delay } from '../base/time';
import { monotonicMs } from '../native/index';
import type { RunnerStore } from '../store/runner-store';
import type { CompletionOutcome, CompletionProcessor } from './completion-processor';
import type { ControlLifecycle } from './control-lifecycle';
import type { AttemptRef } from './notices';
import { runnerGoneProof, runnerInOtherPidNamespace, type RunnerSelf } from './runner';

/** Runners looked at per adoption pass; the next pass continues. */
export const ADOPTION_CANDIDATES_MAX = 16;
const ORPHAN_RECHECK_MS = 50;

/** `onGone`: told of every runner proved gone (its wake-up socket is cleared, docs/decisions/0175). */
export async function adoptGoneRunners(
  store: RunnerStore,
  self: RunnerSelf,
  onGone?: (runnerId: string) => Promise<unknown>,
): Promise<number> {
  const candidates = await store.adoptionCandidates({
    hostId: self.hostId,
    excludeRunnerId: self.runnerId,
    limit: ADOPTION_CANDIDATES_MAX,
  });
  let adopted = 0;
  for (const candidate of candidates) {
    const proof = runnerGoneProof(candidate, self);
    if (proof === null) continue;
    adopted += await store.adoptAttempts({ fromRunnerId: candidate.runnerId, toRunnerId: self.runnerId, proof });
    await onGone?.(candidate.runnerId);
  }
  return adopted;
}

/** Low-sensitivity: what `cancel` learned or did about a run's owner; no ids, no PID. */
export type OrphanStop =
  | { readonly kind: 'stopped'; readonly outcome: CompletionOutcome }
  /** Taken over and stopping; it did not converge within one stop's bound. */
  | { readonly kind: 'stopping' }
  | { readonly kind: 'owner_alive' }
  | { readonly kind: 'owner_elsewhere' }
  /** Its runner ran in another PID namespace: only a runner there can prove or stop the job (docs/decisions/0155). */
  | { readonly kind: 'owner_other_namespace' }
  /** Written before runners were recorded: nobody can prove its owner gone. */
  | { readonly kind: 'owner_unknown' }
  | { readonly kind: 'not_active' };

export interface OrphanStopRequest {
  readonly runnerStore: RunnerStore;
  readonly runner: RunnerSelf;
  readonly runId: string;
  readonly lifecycle: Pick<ControlLifecycle, 'runCycle'>;
  readonly processor: Pick<CompletionProcessor, 'process'>;
  /** The longest one stop can take (its grace, KILL confirmation, settle margin). */
  readonly boundMs: number;
  readonly watch: (ref: AttemptRef) => void;
  readonly onCompleted: (ref: AttemptRef, outcome: CompletionOutcome) => void;
}

export async function stopOrphanedRun(request: OrphanStopRequest): Promise<OrphanStop> {
  const { runnerStore, runner, runId } = request;
  const owner = await runnerStore.activeAttemptOwner(runId);
  if (owner === null) return { kind: 'not_active' };
  if (owner.runner === null) return { kind: 'owner_unknown' };
  if (owner.runner.hostId !== runner.hostId) return { kind: 'owner_elsewhere' };
  const proof = owner.runner.runnerId === runner.runnerId ? null : runnerGoneProof(owner.runner, runner);
  if (proof === null)
    return runnerInOtherPidNamespace(owner.runner) ? { kind: 'owner_other_namespace' } : { kind: 'owner_alive' };
  // A second `cancel` racing for the same orphan loses the CAS: the winner, alive, stops it.
  const adopted = await runnerStore.adoptAttempts({
    fromRunnerId: owner.runner.runnerId,
    toRunnerId: runner.runnerId,
    proof,
    runId,
  });
  if (adopted === 0) return { kind: 'owner_alive' };
  const ref = { runId, attemptId: owner.attemptId };
  request.watch(ref);
  const deadline = monotonicMs() + request.boundMs;
  for (;;) {
    await request.lifecycle.runCycle();
    const outcome = await request.processor.process(ref);
    if (outcome.kind === 'completed' || outcome.kind === 'terminal') return { kind: 'stopped', outcome };
    if (monotonicMs() >= deadline) return { kind: 'stopping' };
    await delay(ORPHAN_RECHECK_MS);
  }
}
