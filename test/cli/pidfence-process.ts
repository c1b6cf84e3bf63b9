// `pidfence` as a real child process for CLI tests: exit status, stdout and stderr.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

export const MAIN = path.resolve(__dirname, '..', '..', 'lib', 'cli', 'main.js');

export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function pidfence(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  cwd = tmpdir(),
  uid?: number,
): Promise<Run> {
  const identity = uid === undefined ? {} : { uid, gid: uid };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000, ...identity },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
      },
    );
  });
}

export function tempDir(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A uid with no passwd entry (root runs children under it to test another, unprivileged user). */
export const NO_PASSWD_UID = 54_321;

/**
 * The suite runs as root (README): a test that runs a child under another uid fails loudly without
 * it instead of passing quietly.
 */
export function requireRoot(why: string): void {
  if (process.getuid?.() !== 0) throw new Error(`this test needs root (${why}); run the suite as root`);
}

/**
 * Gives a store file (and its -wal, -shm) to NO_PASSWD_UID, so the suite's root is no longer its
 * owner and needs grants like anyone (docs/decisions/0170); root still reaches the file.
 */
export function disownStore(db: string): void {
  requireRoot('give the store file to another uid');
  for (const file of [db, `${db}-wal`, `${db}-shm`])
    if (existsSync(file)) chownSync(file, NO_PASSWD_UID, NO_PASSWD_UID);
}
