// The outside programs the tests drive (docs/decisions/0113): Debian's Chromium for the browser test
// and Prometheus's promtool for the alerting rules. Idempotent: found where they are, installed once
// when missing (as root, with apt-get). `node dist/test/helpers/test-tools.js` does it up front for
// `npm test` and .ci/run, so no test spends its time budget on a download.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';
/** Where promtool is kept when the system has none: beside the other test leftovers, never committed. */
export const TOOLS_DIR = path.resolve(__dirname, '..', '..', '..', '.pidfence-test', 'tools');
const APT_TIMEOUT_MS = 900_000;

function commandPath(name: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : undefined;
}

const isRoot = (): boolean => process.getuid?.() === 0;

function apt(args: readonly string[], cwd?: string): boolean {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  return spawnSync('apt-get', [...args], { stdio: ['ignore', 'ignore', 'inherit'], env, timeout: APT_TIMEOUT_MS, ...(cwd === undefined ? {} : { cwd }) }).status === 0;
}

/** apt-get `args`; on failure once more after `apt-get update` (a fresh machine has no package lists). */
function aptWithLists(args: readonly string[], cwd?: string): boolean {
  return apt(args, cwd) || (isRoot() && apt(['update']) && apt(args, cwd));
}

function missing(what: string, how: string): Error {
  return new Error(`${what} is missing and could not be installed here: ${how}`);
}

/** Debian's chromium at /usr/bin/chromium, installed with apt-get (as root) when missing. */
export function ensureChromium(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  if (isRoot() && commandPath('apt-get') !== undefined) {
    process.stderr.write('pidfence tests: installing Debian\'s chromium for the browser test (apt-get, once)\n');
    aptWithLists(['install', '-y', '--no-install-recommends', 'chromium']);
    if (existsSync(CHROMIUM)) return CHROMIUM;
  }
  throw missing(CHROMIUM, 'run `apt-get install -y chromium` as root.');
}

/**
 * promtool: the system's when there is one; else taken out of Debian's `prometheus` package without
 * installing it (`apt-get download` + `dpkg-deb -x`), so no Prometheus server is set up or started.
 */
export function ensurePromtool(): string {
  const system = commandPath('promtool');
  if (system !== undefined) return system;
  const kept = path.join(TOOLS_DIR, 'promtool');
  if (existsSync(kept)) return kept;
  if (commandPath('apt-get') !== undefined && commandPath('dpkg-deb') !== undefined) {
    process.stderr.write('pidfence tests: fetching promtool from Debian\'s prometheus package (apt-get download, once)\n');
    const work = mkdtempSync(path.join(tmpdir(), 'pidfence-promtool-'));
    try {
      if (aptWithLists(['download', 'prometheus'], work)) {
        const deb = readdirSync(work).find((name) => name.endsWith('.deb'));
        if (deb !== undefined && spawnSync('dpkg-deb', ['-x', deb, 'root'], { cwd: work }).status === 0) {
          mkdirSync(TOOLS_DIR, { recursive: true });
          copyFileSync(path.join(work, 'root', 'usr', 'bin', 'promtool'), kept);
          chmodSync(kept, 0o755);
          return kept;
        }
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  throw missing('promtool', 'run `apt-get install -y prometheus` as root, or put promtool on PATH.');
}

if (require.main === module) {
  try {
    process.stdout.write(`test tools: chromium ${ensureChromium()}, promtool ${ensurePromtool()}\n`);
  } catch (error) {
    // The tests that need the tool fail with the same sentence; the others still run.
    process.stderr.write(`test tools: ${(error as Error).message}\n`);
  }
}
