// A throw-away cgroup v2 subtree for one test (docs/decisions/0180), and processes started inside a
// cgroup of it. Cleanup goes through cgroup.kill (never a PID) and removes every directory made.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { cgroup2Mount } from '../../lib/process/job-cgroup';
import { MARK_ENV } from './marked-processes';
import { until } from './wait';

/** Why cgroup tests cannot run here, or null when they can (root and a writable cgroup2 mount). */
export function cgroupUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  const mount = cgroup2Mount();
  if (mount === null) return 'no cgroup2 mount';
  return existsSync(path.join(mount, 'cgroup.procs')) ? null : 'the cgroup2 mount has no cgroup.procs';
}

function populated(directory: string): boolean {
  try {
    return /populated 1/.test(readFileSync(path.join(directory, 'cgroup.events'), 'utf8'));
  } catch {
    return false;
  }
}

/** Kills what is in `directory` and below (cgroup.kill reaches nested cgroups), then removes it all. */
export async function removeCgroupTree(directory: string): Promise<void> {
  if (!existsSync(directory)) return;
  if (populated(directory)) {
    writeFileSync(path.join(directory, 'cgroup.kill'), '1');
    await until(() => !populated(directory), { timeoutMs: 10_000, what: 'the test cgroup emptied' });
  }
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    if (entry.isDirectory()) await removeCgroupTree(path.join(directory, entry.name));
  }
  rmdirSync(directory);
}

/** A fresh subtree under the cgroup2 mount, removed (with whatever is in it) when the test ends. */
export function testSubtree(t: ExecutionContext, name: string): string {
  const mount = cgroup2Mount();
  if (mount === null) throw new Error('no cgroup2 mount');
  const subtree = path.join(mount, `pidfence-test-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(subtree);
  t.teardown(() => removeCgroupTree(subtree));
  return subtree;
}

export function makeCgroup(subtree: string, name: string): { directory: string; id: string } {
  const directory = path.join(subtree, name);
  mkdirSync(directory);
  return { directory, id: statSync(directory, { bigint: true }).ino.toString() };
}

/** `sh -c script` entered into `directory` before it runs anything (so all it starts is born there). */
export function spawnInCgroup(directory: string, script: string, mark: string): ChildProcess {
  const child = spawn('sh', ['-c', `echo 0 > '${directory}/cgroup.procs' && exec sh -c "$0"`, script], {
    stdio: 'ignore',
    env: { ...process.env, [MARK_ENV]: mark },
  });
  child.on('error', () => undefined);
  return child;
}

export function cgroupPids(directory: string): number[] {
  try {
    return readFileSync(path.join(directory, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
