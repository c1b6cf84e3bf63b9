// A PID really reused by another process, forced as root through ns_last_pid (FACTS.md), by the
// C fixture test/fixtures/reuse-pid.c so it takes microseconds. What is signalled here goes through
// pidfence's verified path.
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { captureIdentity, signalVerified, type ProcessIdentity } from '../../lib/native/index';
import { lineReader } from './line-reader';
import { fixturesDir } from './processes';

/** The reuse fixture, compiled into a fresh directory (the caller removes it). */
export function compileReuseFixture(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-reuse-'));
  const binary = path.join(dir, 'reuse-pid');
  execFileSync('cc', ['-O2', '-o', binary, path.join(fixturesDir, 'reuse-pid.c')]);
  return binary;
}

export interface ReuseTrial {
  readonly original: ProcessIdentity;
  readonly successor: ProcessIdentity | null;
}

/**
 * One forced reuse: `original` (killed and reaped before `check` runs) and `successor`, the process
 * that took its PID (null when another process took it first). Both lead their own session.
 */
export async function runReuseTrial(binary: string, check: (trial: ReuseTrial) => void): Promise<void> {
  const helper = spawn(binary, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  const nextLine = lineReader(helper.stdout!, 'the reuse fixture');
  const exited = new Promise((resolve) => helper.once('exit', resolve));
  const first = await nextLine();
  if (!first.startsWith('original ')) throw new Error(`reuse fixture: ${first}`);
  const originalPid = Number(first.split(' ')[1]);
  const original = captureIdentity(originalPid);
  if (original === null) throw new Error('the original exited before capture');
  helper.stdin!.write('go\n');
  const [word, pidText] = (await nextLine()).split(' ');
  if (word === 'error') throw new Error(`reuse fixture failed at ${pidText}`);
  const successor = word === 'successor' ? captureIdentity(Number(pidText)) : null;
  try {
    check({ original, successor });
  } finally {
    const leftover = successor ?? (word === 'missed' ? captureIdentity(Number(pidText)) : null);
    if (leftover) signalVerified(leftover, 'SIGKILL', { group: true });
    helper.stdin!.end();
    await exited;
  }
}
