// A small disk that fills up on demand (docs/decisions/0191): a 4 MiB tmpfs mounted on a unique
// temporary directory (several worktrees run these tests at once), filled to its last byte with
// fallocate and freed again by removing the filler; unmounted at the end of the test. Needs root,
// as the tests here run; a mount that fails fails the test with the reason.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmdirSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { ExecutionContext } from 'ava';

export const SMALL_DISK_BYTES = 4 * 1024 * 1024;

export interface SmallDisk {
  /** The mount point. */
  readonly dir: string;
  /** Takes every free byte (what is left is below one block). */
  fill(): void;
  /** Gives back what fill() took. */
  free(): void;
  freeBytes(): number;
  /** Every file on the disk, relative to it (to find what was left behind). */
  files(): string[];
}

function freeBytesOf(dir: string): number {
  const stats = statfsSync(dir);
  return Number(stats.bavail) * Number(stats.bsize);
}

export function smallDisk(t: ExecutionContext): SmallDisk {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SMALL_DISK_BYTES},mode=0755`, 'tmpfs', dir]);
  } catch (error) {
    rmdirSync(dir);
    throw error;
  }
  // Registered first, so it runs after the teardowns of the processes that use the disk.
  t.teardown(() => {
    if (spawnSync('umount', [dir]).status !== 0) spawnSync('umount', ['-l', dir]);
    rmdirSync(dir);
  });
  let fillers = 0;
  return {
    dir,
    fill() {
      for (let round = 0; round < 4 && freeBytesOf(dir) > 0; round++) {
        spawnSync('fallocate', ['-l', String(freeBytesOf(dir)), path.join(dir, `filler-${fillers++}`)]);
      }
    },
    free() {
      for (const name of readdirSync(dir))
        if (name.startsWith('filler-')) rmSync(path.join(dir, name), { force: true });
    },
    freeBytes: () => freeBytesOf(dir),
    files: () => (readdirSync(dir, { recursive: true }) as string[]).filter((name) => !name.startsWith('filler-')),
  };
}
