// Finds the native job launcher (docs/decisions/0151): the committed static prebuild for this
// architecture first, then a local build (node-gyp). There is no other launcher: without one, a
// job cannot be started and the caller gets a typed error that says how to get one.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { PidfenceError } from '../base/errors';

export const LAUNCHER_BINARY_NAME = 'pidfence-launcher';

const packageRoot = path.resolve(__dirname, '..', '..', '..');

let found: string | undefined;

/** Where the launcher is looked for, in order. */
export function launcherCandidates(): readonly string[] {
  return [
    path.join(packageRoot, 'prebuilds', `${process.platform}-${process.arch}`, LAUNCHER_BINARY_NAME),
    path.join(packageRoot, 'build', 'Release', LAUNCHER_BINARY_NAME),
  ];
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The launcher's absolute path, or ERR_PIDFENCE_LAUNCHER_UNAVAILABLE. */
export function launcherPath(): string {
  if (found !== undefined) return found;
  const candidates = launcherCandidates();
  const file = process.platform === 'linux' ? candidates.find(isExecutable) : undefined;
  if (file === undefined) {
    throw new PidfenceError(
      `pidfence cannot start jobs here: no native launcher for ${process.platform}-${process.arch} (looked for ${candidates.map((c) => path.relative(packageRoot, c)).join(' and ')}). ` +
        'Reinstall pidfence, or build it from source with `npm run build:native` (needs a C compiler).',
      'ERR_PIDFENCE_LAUNCHER_UNAVAILABLE',
    );
  }
  found = file;
  return file;
}
