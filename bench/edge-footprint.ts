// Edge footprint (issue 19 §4; docs/decisions/0105). Not a test.
// 1. The modules each edge/standalone entry loads, in a fresh process.
// 2. Idle RSS and wake-ups per minute of an edge `pidfence supervise` holding 1,000 idle runs (and
//    holding none), against a bare `node -e` holding a better-sqlite3 database (WAL), all idle over
//    the same window. Wake-ups: voluntary context switches of every thread of the process.
// 3. WAL bytes per cancellation end to end: `pidfence run` → `pidfence cancel` → stopped → terminal,
//    with a reader holding the WAL open so that no checkpoint can reuse it during the count.
// 4. Installed size and package count: the packed tarball installed into a new project alone (edge)
//    and with its optional peers (full), against the install before issue 33 (docs/decisions/0223).
// Run: npm run bench:edge (PIDFENCE_BENCH_IDLE_MS, default 60000; PIDFENCE_BENCH_WAL_RUNS, default 10)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import Database from 'better-sqlite3';

import { osPrincipal } from '../lib/cli/os-user';
import { openSqliteStore } from '../lib/store/sqlite/index';
import { installPacked, packInto } from '../test/helpers/packed-install';
import { count, idleRows, until, type IdleRow } from './lib/held-runs';
import { machineHeader } from './lib/machine';

const root = path.resolve(__dirname, '..', '..');
const CLI = path.join(root, 'dist', 'lib', 'cli', 'main.js');
const IDLE_MS = Number(process.env.PIDFENCE_BENCH_IDLE_MS ?? 60_000);
const WAL_RUNS = Number(process.env.PIDFENCE_BENCH_WAL_RUNS ?? 10);
const HELD_RUNS = 1_000;
const RSS_TARGET = 1.2;
/** After the seeding, before the window: the supervise's first cycles and a GC have passed. */
const SETTLE_MS = 10_000;

function modulesLoaded(entry: string): { files: number; packages: string[] } {
  const script = `require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`;
  const result = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) throw new Error(`node -e failed: ${result.stderr}`);
  const files = JSON.parse(result.stdout) as string[];
  const packages = new Set(
    files
      .map((file) => /node_modules\/((@[^/]+\/)?[^/]+)/.exec(file)?.[1])
      .filter((name): name is string => name !== undefined),
  );
  return { files: files.length, packages: [...packages].sort() };
}

function walBytes(file: string): number {
  try {
    return fs.statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/** Lines of a child's stderr, collected. */
function stderrOf(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  return () => text;
}

interface WalCost {
  readonly start: number;
  readonly cancellation: number;
  readonly pageSize: number;
}

/** Mean WAL bytes of a run's start and of its cancellation, over WAL_RUNS runs of the real commands. */
async function walPerCancellation(dir: string): Promise<WalCost> {
  const file = path.join(dir, 'wal.db');
  const store = openSqliteStore(file);
  for (const permission of ['run.read', 'run.stop'] as const)
    await store.managementStore.writeGrant({ subject: osPrincipal(), projectId: 'edge', permission }, 'bench');
  store.close();
  // An open read transaction pins the WAL: checkpoints may copy frames back, never restart the file.
  const pin = new Database(file, { readonly: true });
  pin.exec('BEGIN');
  pin.prepare('SELECT count(*) AS n FROM runs').get();
  const pageSize = pin.pragma('page_size', { simple: true }) as number;
  let start = 0;
  let cancellation = 0;
  try {
    for (let i = 0; i < WAL_RUNS; i++) {
      const marker = path.join(dir, `wal-${i}`);
      const before = walBytes(file);
      const runner = spawn(
        process.execPath,
        [
          CLI,
          'run',
          '--db',
          file,
          '--project',
          'edge',
          '--',
          'sh',
          '-c',
          `trap 'exit 143' TERM; echo up > ${marker}; while :; do sleep 0.05; done`,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      const said = stderrOf(runner);
      const ended = once(runner, 'exit');
      await until(() => /run (\S+) started/.test(said()) && fs.existsSync(marker), 'the run to start');
      const runId = /run (\S+) started/.exec(said())?.[1] as string;
      await until(
        () => count(file, `SELECT count(*) AS n FROM attempts WHERE run_id = '${runId}' AND status = 'running'`) === 1,
        'the attempt to be running',
      );
      const started = walBytes(file);
      const cancel = spawn(process.execPath, [CLI, 'cancel', runId, '--db', file], { stdio: 'ignore' });
      await once(cancel, 'exit');
      await ended;
      if (count(file, `SELECT count(*) AS n FROM runs WHERE id = '${runId}' AND status = 'cancelled'`) !== 1)
        throw new Error('bench: the run did not end cancelled');
      start += started - before;
      cancellation += walBytes(file) - started;
    }
  } finally {
    pin.exec('COMMIT');
    pin.close();
  }
  return { start: start / WAL_RUNS, cancellation: cancellation / WAL_RUNS, pageSize };
}

function duKb(target: string): number {
  return Number(spawnSync('du', ['-sk', target], { encoding: 'utf8' }).stdout.split('\t')[0]);
}

/** The packages of a node_modules folder by name (`@scope/name` for scoped ones). */
function packagesIn(modules: string): string[] {
  return fs
    .readdirSync(modules)
    .filter((name) => !name.startsWith('.'))
    .flatMap((name) =>
      name.startsWith('@') ? fs.readdirSync(path.join(modules, name)).map((inner) => `${name}/${inner}`) : [name],
    );
}

/** Every package reachable from `roots` through `dependencies` (flat node_modules, as npm installs them). */
function reachable(modules: string, roots: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...roots];
  while (queue.length > 0) {
    const name = queue.pop() as string;
    if (seen.has(name) || !fs.existsSync(path.join(modules, name, 'package.json'))) continue;
    seen.add(name);
    const manifest = JSON.parse(fs.readFileSync(path.join(modules, name, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    queue.push(...Object.keys(manifest.dependencies ?? {}));
  }
  return seen;
}

interface Footprint {
  readonly totalKb: number;
  readonly packages: ReadonlyArray<{ name: string; kb: number }>;
  /** Everything but better-sqlite3 and what only it brings (its prebuilt-download helpers). */
  readonly withoutSqliteKb: number;
  readonly httpFrameworks: readonly string[];
}

const HTTP_FRAMEWORKS = ['fastify', 'express', 'koa', 'hapi', '@hapi/hapi', 'restify'];

/** `npm install` of the tarball (and `alongside`) into a new project: sizes by `du`, packages by name, largest first. */
function installFootprint(dir: string, tarball: string, name: string, alongside: readonly string[]): Footprint {
  const modules = installPacked(tarball, path.join(dir, name), alongside);
  const names = packagesIn(modules);
  const packages = names.map((pkg) => ({ name: pkg, kb: duKb(path.join(modules, pkg)) })).sort((a, b) => b.kb - a.kb);
  const own = (
    JSON.parse(fs.readFileSync(path.join(modules, 'pidfence', 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    }
  ).dependencies;
  const peers = alongside.map((spec) => spec.slice(0, spec.lastIndexOf('@')));
  const withoutSqlite = reachable(modules, [
    ...Object.keys(own).filter((dep) => dep !== 'better-sqlite3'),
    ...peers,
  ]).add('pidfence');
  return {
    totalKb: duKb(modules),
    packages,
    withoutSqliteKb: packages.filter((pkg) => withoutSqlite.has(pkg.name)).reduce((sum, pkg) => sum + pkg.kb, 0),
    httpFrameworks: names.filter((pkg) => HTTP_FRAMEWORKS.includes(pkg)),
  };
}

/** The install measured on 2026-12-04 (docs/benchmarks.md, before issue 33): every dependency, Fastify and prom-client included. */
const BEFORE = { mb: 40.6, packages: 104 };
/** Issue 33: an edge device's install, without better-sqlite3 and its own helpers, fits in this. */
const EDGE_TARGET_KB = 5 * 1024;

function installRows(dir: string): string[] {
  const tarball = path.join(dir, packInto(dir).filename);
  const version = (pkg: string): string =>
    (JSON.parse(fs.readFileSync(path.join(root, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string })
      .version;
  const peers = ['pg', '@types/pg', 'fastify', 'prom-client'].map((pkg) => `${pkg}@${version(pkg)}`);
  const edge = installFootprint(dir, tarball, 'edge', []);
  const full = installFootprint(dir, tarball, 'full', peers);
  const row = (what: string, footprint: Footprint): string =>
    `| ${what} | ${mb(footprint.totalKb)} | ${footprint.packages.length} | ${mb(footprint.withoutSqliteKb)} | ${footprint.httpFrameworks.join(', ') || 'none'} | ${(footprint.totalKb / 1024 / BEFORE.mb).toFixed(2)}x | ${(footprint.packages.length / BEFORE.packages).toFixed(2)}x | ${footprint.packages
      .slice(0, 5)
      .map((pkg) => `${pkg.name} ${mb(pkg.kb)}`)
      .join(', ')} |`;
  return [
    '',
    `Installed size (\`npm pack\`, then \`npm install\` of the tarball into a new project, better-sqlite3 with its one prebuilt binary; \`du\`), against the install before issue 33 (${BEFORE.mb} MB, ${BEFORE.packages} packages, 2026-12-04):`,
    '',
    '| install | size | packages | without better-sqlite3 and what only it brings | HTTP framework | size vs before | packages vs before | largest |',
    '| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |',
    row('edge: `npm install pidfence`', edge),
    row(`full: \`npm install pidfence ${peers.map((spec) => spec.slice(0, spec.lastIndexOf('@'))).join(' ')}\``, full),
    '',
    `- ${edge.withoutSqliteKb <= EDGE_TARGET_KB && edge.httpFrameworks.length === 0 ? 'PASS' : 'MISS'} edge install without better-sqlite3: ${mb(edge.withoutSqliteKb)}, HTTP framework: ${edge.httpFrameworks.join(', ') || 'none'} (target <= ${mb(EDGE_TARGET_KB)} and none)`,
  ];
}

const mb = (kb: number): string => `${(kb / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  const lines: string[] = [
    '## Edge footprint',
    '',
    machineHeader([
      `idle window ${IDLE_MS / 1000} s after ${SETTLE_MS / 1000} s of settling, the four processes side by side; WAL: ${WAL_RUNS} runs`,
    ]),
    '',
  ];
  lines.push('| entry | modules loaded | packages from node_modules |', '| --- | ---: | --- |');
  for (const entry of [
    'pidfence',
    'pidfence/native',
    'pidfence/process',
    'pidfence/contract',
    'pidfence/sqlite',
    'pidfence/dispatch',
    'pidfence/execution',
  ]) {
    const loaded = modulesLoaded(entry);
    lines.push(`| \`${entry}\` | ${loaded.files} | ${loaded.packages.join(', ') || '—'} |`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-edge-'));
  try {
    const rows = await idleRows({
      dir,
      cli: CLI,
      cwd: root,
      heldRuns: HELD_RUNS,
      settleMs: SETTLE_MS,
      idleMs: IDLE_MS,
    });
    const bare = rows[0] as IdleRow;
    lines.push('', '| process, idle | RSS | RSS vs bare | wake-ups per minute |', '| --- | ---: | ---: | ---: |');
    for (const row of rows)
      lines.push(
        `| ${row.name} | ${row.rssKb} kB | ${(row.rssKb / bare.rssKb).toFixed(2)}x | ${row.wakeupsPerMinute.toFixed(0)} |`,
      );
    const heldRatio = (rows[3]?.rssKb ?? Number.NaN) / bare.rssKb;
    lines.push(
      '',
      `- ${heldRatio <= RSS_TARGET ? 'PASS' : 'MISS'} idle RSS of an edge supervise holding ${HELD_RUNS} runs vs bare node + better-sqlite3: ${heldRatio.toFixed(2)}x (target <= ${RSS_TARGET}x)`,
    );

    const wal = await walPerCancellation(dir);
    const frame = wal.pageSize + 24;
    lines.push(
      '',
      `| WAL bytes per run, \`pidfence run\` + \`pidfence cancel\` (page ${wal.pageSize} B, frame ${frame} B) | bytes | frames |`,
      '| --- | ---: | ---: |',
    );
    lines.push(
      `| run start: runner registered, run admitted, job running | ${wal.start.toFixed(0)} | ${(wal.start / frame).toFixed(1)} |`,
    );
    lines.push(
      `| cancellation: intent → dispatch claim and result → stopped → terminal, runner ended | ${wal.cancellation.toFixed(0)} | ${(wal.cancellation / frame).toFixed(1)} |`,
    );
    lines.push(
      `| whole run | ${(wal.start + wal.cancellation).toFixed(0)} | ${((wal.start + wal.cancellation) / frame).toFixed(1)} |`,
    );

    lines.push(...installRows(dir));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
