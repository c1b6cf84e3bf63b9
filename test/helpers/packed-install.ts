// The package as a new user installs it (docs/decisions/0080): `npm pack` of this checkout, then an
// install of the tarball into a fresh project. Offline: npm installs from its local cache, with
// scripts off; better-sqlite3 gets the binary this checkout built for the same version, as its
// prebuilt download would (that download is unreachable here, a source build slow).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { packageRoot } from '../../lib/store/migrations';

export interface PackResult {
  readonly filename: string;
  readonly size: number;
  readonly unpackedSize: number;
  readonly files: ReadonlyArray<{ readonly path: string; readonly size: number }>;
}

/** Runs a command to its end; a failure throws with its output. */
export function runChecked(command: string, args: readonly string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 240_000 });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

/** `npm pack` of this checkout into `directory` (--ignore-scripts: dist/ is built already). */
export function packInto(directory: string): PackResult {
  return (
    JSON.parse(
      runChecked('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', directory], packageRoot()),
    ) as PackResult[]
  )[0]!;
}

/** The file in the project that keeps npm's output of the install. */
export const INSTALL_LOG = 'npm-install.log';

/** Installs `tarball` (and `alongside`, e.g. `pg@8.16.3`) into a new project at `project`; returns its node_modules. */
export function installPacked(tarball: string, project: string, alongside: readonly string[] = []): string {
  fs.mkdirSync(project, { recursive: true });
  fs.writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }),
  );
  const install = [
    'install',
    '--ignore-scripts',
    '--no-audit',
    '--no-fund',
    '--no-package-lock',
    tarball,
    ...alongside,
  ];
  let result = spawnSync('npm', [...install, '--offline'], { cwd: project, encoding: 'utf8', timeout: 240_000 });
  // A cache that holds the tarballs but not every package's metadata: let npm fill the gaps.
  if (result.status !== 0)
    result = spawnSync('npm', [...install, '--prefer-offline'], { cwd: project, encoding: 'utf8', timeout: 240_000 });
  if (result.status !== 0)
    throw new Error(
      `npm install of ${tarball} failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`,
    );
  // What npm said (warnings such as EBADENGINE), for tests that read it.
  fs.writeFileSync(path.join(project, INSTALL_LOG), `${result.stdout}${result.stderr}`);
  const installed = path.join(project, 'node_modules');
  // Scripts were off: give better-sqlite3 the one binary a prebuilt download would bring.
  const binary = path.join('build', 'Release', 'better_sqlite3.node');
  fs.mkdirSync(path.dirname(path.join(installed, 'better-sqlite3', binary)), { recursive: true });
  fs.copyFileSync(
    path.join(packageRoot(), 'node_modules', 'better-sqlite3', binary),
    path.join(installed, 'better-sqlite3', binary),
  );
  return installed;
}

/** The version of `name` in a node_modules folder. */
export function installedVersion(modules: string, name: string): string {
  return (JSON.parse(fs.readFileSync(path.join(modules, name, 'package.json'), 'utf8')) as { version: string }).version;
}
