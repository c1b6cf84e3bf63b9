// Processes a test started, found by a mark in their environment (read from /proc), and a cleanup
// that ends them through the verified path: each identity is captured from its own pidfd before
// SIGKILL goes through that same identity. Never a bare PID.
import { readdirSync, readFileSync } from 'node:fs';

import type { ExecutionContext } from 'ava';

import { captureIdentity, signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { delay } from './wait';

export const MARK_ENV = 'PIDFENCE_TEST_MARK';

/** A mark unique to this test process and call. */
export function uniqueMark(name: string): string {
  return `${name}-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Live (not zombie) processes whose environment carries `mark`. */
export function markedProcesses(mark: string): ProcessIdentity[] {
  const found: ProcessIdentity[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, 'utf8').includes(`${MARK_ENV}=${mark}\0`)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
      const identity = captureIdentity(Number(entry));
      if (identity !== null) found.push(identity);
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return found;
}

/** KILLs every marked process through its captured identity, until none is left (bounded). */
export async function killMarked(mark: string, rounds = 50): Promise<number> {
  let killed = 0;
  for (let round = 0; round < rounds; round += 1) {
    const live = markedProcesses(mark);
    if (live.length === 0) break;
    for (const identity of live)
      if (signalVerified(identity, 'SIGKILL', { group: false }).kind === 'signalled') killed += 1;
    await delay(20);
  }
  return killed;
}

export function killMarkedAtEnd(t: ExecutionContext, mark: string): void {
  t.teardown(async () => {
    await killMarked(mark);
  });
}
