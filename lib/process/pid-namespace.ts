// The PID namespace a PID number belongs to (docs/decisions/0155). A PID means one process only in
// the namespace it was read in: the same number seen from another namespace names another process
// or none, so proofs about it (exited, reused, gone) are only made by a caller in that namespace.
import { statSync } from 'node:fs';

/** The namespace file of this process; its inode names the namespace for the boot. */
const OWN_PID_NAMESPACE = '/proc/self/ns/pid';

let cached: string | null | undefined;

/**
 * The inode of this process's PID namespace as a decimal string, or null where it cannot be read
 * (no /proc, no namespaces): then no handle of a namespace is ever proved from here. Read once:
 * a process cannot change its own PID namespace (setns affects only its future children).
 */
export function ownPidNamespace(): string | null {
  if (cached !== undefined) return cached;
  try {
    cached = statSync(OWN_PID_NAMESPACE, { bigint: true }).ino.toString();
  } catch {
    cached = null;
  }
  return cached;
}

/**
 * True when a handle recorded in namespace `recorded` may be proved from here. A v1 handle (no
 * namespace recorded) keeps its old meaning: it was written before namespaces were recorded.
 */
export function pidNamespaceMatches(recorded: string | undefined): boolean {
  return recorded === undefined || recorded === ownPidNamespace();
}
