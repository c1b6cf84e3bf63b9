// A database file in its own temporary directory, removed with everything beside it (WAL, SHM); a
// PostgreSQL runner's receipt directory, removed with what the runner keeps beside it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

export interface TempFile {
  readonly file: string;
  cleanup(): void;
}

export function tempFile(prefix = 'pidfence-', name = 'pidfence.db'): TempFile {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { file: path.join(dir, name), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A receipt directory for a runner on PostgreSQL, removed when the test ends together with the job
 * logs and the wake-up sockets the runner keeps beside it (`<dir>.logs`, `<dir>.wake`).
 */
export function receiptsDirectory(t: ExecutionContext, prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => {
    for (const made of [dir, `${dir}.logs`, `${dir}.wake`]) rmSync(made, { recursive: true, force: true });
  });
  return dir;
}
