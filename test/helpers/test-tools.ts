// The outside programs the tests drive (docs/decisions/0113): Debian's Chromium for the browser test,
// Prometheus's promtool for the alerting rules, and the clock-step shim built from its C source
// (docs/decisions/0190). Idempotent: found where they are, installed or built once when missing (as
// root, with apt-get). `node dist/test/helpers/test-tools.js` does it up front for `npm test` and
// .ci/run, so no test spends its time budget on a download or a compile.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
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
  return (
    spawnSync('apt-get', [...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env,
      timeout: APT_TIMEOUT_MS,
      ...(cwd === undefined ? {} : { cwd }),
    }).status === 0
  );
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
    process.stderr.write("pidfence tests: installing Debian's chromium for the browser test (apt-get, once)\n");
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
    process.stderr.write(
      "pidfence tests: fetching promtool from Debian's prometheus package (apt-get download, once)\n",
    );
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

const CLOCK_STEP_SOURCE = path.resolve(__dirname, '..', '..', '..', 'test', 'fixtures', 'clock-step.c');

/**
 * The LD_PRELOAD shim that steps CLOCK_REALTIME for one process tree (test/fixtures/clock-step.c),
 * built with the C compiler `npm install` already needed (better-sqlite3 and the addon compile
 * from source here). Named after its source's digest: a changed source builds a new one, an
 * unchanged one is reused; built under a temporary name and renamed, so two test files asking at
 * once never load a half-written library.
 */
export function ensureClockStepShim(): string {
  const digest = createHash('sha256').update(readFileSync(CLOCK_STEP_SOURCE)).digest('hex').slice(0, 16);
  const built = path.join(TOOLS_DIR, `clock-step-${digest}.so`);
  if (existsSync(built)) return built;
  const compiler = commandPath('cc') ?? commandPath('gcc');
  if (compiler === undefined) throw missing('a C compiler (cc)', 'run `apt-get install -y gcc` as root.');
  mkdirSync(TOOLS_DIR, { recursive: true });
  const partial = `${built}.${process.pid}.tmp`;
  const result = spawnSync(
    compiler,
    ['-O2', '-Wall', '-Werror', '-shared', '-fPIC', '-o', partial, CLOCK_STEP_SOURCE, '-ldl'],
    { encoding: 'utf8' },
  );
  if (result.status !== 0) {
    rmSync(partial, { force: true });
    throw new Error(`building the clock-step shim failed: ${result.stderr}`);
  }
  renameSync(partial, built);
  return built;
}

/** Real daemons a job may leave behind (docs/decisions/0180): program → Debian package. */
export const DAEMON_PROGRAMS = { 'dbus-daemon': 'dbus-daemon', tmux: 'tmux', 'ssh-agent': 'openssh-client' } as const;

/** dbus-daemon, tmux and ssh-agent on PATH, installed with apt-get (as root) when missing. */
export function ensureDaemonPrograms(): string {
  const absent = Object.entries(DAEMON_PROGRAMS).filter(([program]) => commandPath(program) === undefined);
  if (absent.length > 0 && isRoot() && commandPath('apt-get') !== undefined) {
    process.stderr.write('pidfence tests: installing the daemons a job may leave behind (apt-get, once)\n');
    aptWithLists(['install', '-y', '--no-install-recommends', ...absent.map(([, pkg]) => pkg)]);
  }
  const still = Object.keys(DAEMON_PROGRAMS).filter((program) => commandPath(program) === undefined);
  if (still.length > 0)
    throw missing(still.join(', '), `run \`apt-get install -y ${Object.values(DAEMON_PROGRAMS).join(' ')}\` as root.`);
  return Object.keys(DAEMON_PROGRAMS).join(', ');
}

if (require.main === module) {
  const tools: ReadonlyArray<readonly [string, () => string]> = [
    ['chromium', ensureChromium],
    ['promtool', ensurePromtool],
    ['clock-step shim', ensureClockStepShim],
    ['daemons', ensureDaemonPrograms],
  ];
  for (const [name, ensure] of tools) {
    try {
      process.stdout.write(`test tools: ${name} ${ensure()}\n`);
    } catch (error) {
      // The tests that need the tool fail with the same sentence; the others still run.
      process.stderr.write(`test tools: ${(error as Error).message}\n`);
    }
  }
}
