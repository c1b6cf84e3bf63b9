// A database file in its own temporary directory, removed with everything beside it (WAL, SHM).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TempFile {
  readonly file: string;
  cleanup(): void;
}

export function tempFile(prefix = 'pidfence-', name = 'pidfence.db'): TempFile {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { file: path.join(dir, name), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
