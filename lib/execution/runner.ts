// A runner of a store (docs/decisions/0070): a foreground `run`, a `supervise`, or a `cancel` that
// stops an orphan. It registers with the identity of its own process; another runner of the same
// host may take over its attempts only once that identity proves it gone. PID reuse cannot fool the
// proof: a reused PID carries another start time and pidfs inode (identity_mismatch), and another
// boot id means every process of the old boot is gone.
import { PidfenceError } from '../base/errors';
import { bootId, capabilities, captureIdentity, type ExpectedIdentity, signalVerified } from '../native/index';
import { ownPidNamespace, pidNamespaceMatches } from '../process/index';
import type { RunnerStore } from '../store/runner-store';
import type { AdoptionProof, RunnerKind, RunnerRecord } from '../contract/index';

export interface RunnerSelf {
  readonly runnerId: string;
  readonly hostId: string;
  readonly kind: RunnerKind;
}

/**
 * This process's identity as JSON; `{}` where identities cannot be proved (no addon, old kernel):
 * such a runner can then be taken over only once it ended cleanly, never on a guess.
 */
function ownIdentityText(): string {
  let identity;
  try {
    identity = captureIdentity(process.pid);
  } catch (error) {
    if (error instanceof PidfenceError && error.code === 'ERR_PIDFENCE_UNSUPPORTED') return '{}';
    throw error;
  }
  if (identity === null)
    throw new PidfenceError(
      'this process has no identity of its own; /proc is not what it should be.',
      'ERR_PIDFENCE_SYSCALL',
    );
  const { pid, bootId: boot, startTicks, pidfsIno } = identity;
  // The PID namespace its PID was read in: from another one it proves nothing (docs/decisions/0155).
  const pidNs = ownPidNamespace();
  return JSON.stringify({
    pid,
    bootId: boot,
    startTicks,
    ...(pidfsIno === undefined ? {} : { pidfsIno }),
    ...(pidNs === null ? {} : { pidNs }),
  });
}

export async function registerRunner(store: RunnerStore, self: RunnerSelf): Promise<void> {
  await store.registerRunner({
    runnerId: self.runnerId,
    hostId: self.hostId,
    kind: self.kind,
    identity: ownIdentityText(),
  });
}

/**
 * The stored identity as signalVerified expects it; malformed text proves nothing (null), and
 * neither does one read in another PID namespace.
 */
function parseIdentity(text: string): ExpectedIdentity | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { pid, bootId: boot, startTicks, pidfsIno, pidNs } = value as Record<string, unknown>;
  if (typeof pid !== 'number' || typeof boot !== 'string' || typeof startTicks !== 'string') return null;
  if (pidNs !== undefined && (typeof pidNs !== 'string' || !pidNamespaceMatches(pidNs))) return null;
  return typeof pidfsIno === 'string' ? { pid, bootId: boot, startTicks, pidfsIno } : { pid, bootId: boot, startTicks };
}

/** The runner recorded a PID namespace other than this process's: nothing about it is provable here. */
export function runnerInOtherPidNamespace(runner: RunnerRecord): boolean {
  let value: unknown;
  try {
    value = JSON.parse(runner.identity);
  } catch {
    return false;
  }
  const pidNs = typeof value === 'object' && value !== null ? (value as Record<string, unknown>).pidNs : undefined;
  return typeof pidNs === 'string' && !pidNamespaceMatches(pidNs);
}

/**
 * How `runner` is proved gone, seen from `self`; null while it may still run (or is on another
 * host, or its identity cannot be read): then nobody takes its attempts over.
 */
export function runnerGoneProof(runner: RunnerRecord, self: RunnerSelf): AdoptionProof | null {
  if (runner.hostId !== self.hostId || runner.runnerId === self.runnerId) return null;
  if (runner.endedAtMs !== null) return 'ended';
  const identity = parseIdentity(runner.identity);
  if (identity === null) return null;
  // A runner identity written on a pidfs kernel always carries its inode; one without it proves
  // nothing here (a mismatch on it would not mean another process).
  if (identity.pidfsIno === undefined && capabilities().pidfsIdentity) return null;
  if (identity.bootId !== bootId()) return 'rebooted';
  const probe = signalVerified(identity, 0, { group: false });
  if (probe.kind === 'already_exited') return 'exited';
  // Only a different process at that PID proves it; any other doubt keeps the runner alive.
  if (probe.kind === 'identity_mismatch' && (probe.reason === 'start_ticks' || probe.reason === 'pidfs_ino'))
    return 'pid_reused';
  return null;
}
