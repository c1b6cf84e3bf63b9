// The package as a new user gets it (docs/decisions/0080): `npm pack`, then the tarball's file list
// against an allowlist, then an install into a temporary project without `pg` that uses the SQLite
// path and type-checks a strict consumer (skipLibCheck off) under node16 and node10 resolution.
// Offline: npm installs from its local cache, with scripts off; better-sqlite3's compiled binary
// is copied from this checkout (its prebuilt download is unreachable here, a source build slow).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';

import test from 'ava';

import { packageRoot } from '../../lib/store/migrations';
import { installedVersion, installPacked, packInto, runChecked as run, type PackResult } from '../helpers/packed-install';

const root = packageRoot();
/** The issue's size target (a figure to report, like a benchmark's); the guard below only catches a stray build tree. */
const GLIBC_PACKED_TARGET_BYTES = 350 * 1024;
const PACKED_GUARD_BYTES = 1024 * 1024;

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-pack-'));
let packed: PackResult | undefined;
function pack(): PackResult {
  packed ??= packInto(workDir);
  return packed;
}

test.after.always(() => fs.rmSync(workDir, { recursive: true, force: true }));

/** Every file the tarball may hold; anything else (tests, benches, maps, sources) is a mistake. */
const ALLOWED = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^binding\.gyp$/,
  /^dist\/lib\/.+\.(js|d\.ts)$/,
  /^lib\/store\/(sqlite|postgres)\/migrations\/[^/]+\.sql$/,
  /^native\/[^/]+\.(cc|h)$/,
  /^native\/tools\/source-digest\.js$/,
  /^prebuilds\/linux-(x64|arm64)\/pidfence\.(glibc|musl)\.node$/,
  /^docs\/(benchmarks|gates)\.md$/,
  /^docs\/prometheus-rules\.yml$/,
  /^docs\/status-page\.png$/,
  /^docs\/decisions\/\d{4}-[a-z0-9-]+\.md$/,
  /^docs\/design\/[a-zA-Z0-9-]+\.md$/,
];

test('the tarball holds only allowed files, LICENSE, README and every doc it links, and no source map', (t) => {
  const { files, size, unpackedSize } = pack();
  const paths = files.map((file) => file.path);
  t.deepEqual(paths.filter((file) => !ALLOWED.some((pattern) => pattern.test(file))), []);
  t.deepEqual(paths.filter((file) => file.endsWith('.map')), []);
  for (const required of ['LICENSE', 'README.md', 'package.json', 'dist/lib/index.js', 'dist/lib/index.d.ts']) {
    t.true(paths.includes(required), `${required} is in the tarball`);
  }
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const linked = [...readme.matchAll(/\bdocs\/[\w./-]+/g)].map((match) => match[0].replace(/[.]$/, ''));
  t.true(linked.length > 0, 'the README links some docs');
  for (const doc of linked) {
    // A link may name a whole file, a folder or a decision by its number (`docs/decisions/0040`).
    t.true(paths.some((file) => file.startsWith(doc)), `${doc} is in the tarball`);
  }
  for (const prebuild of ['prebuilds/linux-x64/pidfence.glibc.node', 'prebuilds/linux-arm64/pidfence.glibc.node']) {
    t.true(paths.includes(prebuild), `${prebuild} is in the tarball`);
  }
  t.log(`packed ${(size / 1024).toFixed(1)} kB, unpacked ${(unpackedSize / 1024).toFixed(1)} kB, ${files.length} files`);
  // Where the packed bytes go (docs/decisions/0082): each file gzipped on its own, summed per share.
  const shares = packedShares(paths);
  t.log(`shares, gzip -9 per file: ${[...shares].map(([share, bytes]) => `${share} ${(bytes / 1024).toFixed(1)} kB`).join(', ')}`);
  const withoutMusl = size - (shares.get('musl prebuilds') ?? 0);
  t.log(`packed without musl ≈ ${(withoutMusl / 1024).toFixed(1)} kB: ${withoutMusl <= GLIBC_PACKED_TARGET_BYTES ? 'PASS' : 'MISS'} against the ${GLIBC_PACKED_TARGET_BYTES / 1024} kB target`);
  t.true(size <= PACKED_GUARD_BYTES, `packed ${size} B: something large slipped into the tarball`);
});

/** Gzipped bytes of the tarball's files per share, largest first. */
function packedShares(paths: readonly string[]): Map<string, number> {
  const shareOf = (file: string): string => {
    if (file.endsWith('.musl.node')) return 'musl prebuilds';
    if (file.endsWith('.glibc.node')) return 'glibc prebuilds';
    if (file.endsWith('.d.ts')) return 'types';
    if (file.startsWith('dist/')) return 'JavaScript';
    if (file.startsWith('docs/') || file === 'README.md') return 'docs';
    return 'other';
  };
  const shares = new Map<string, number>();
  for (const file of paths) {
    const share = shareOf(file);
    shares.set(share, (shares.get(share) ?? 0) + zlib.gzipSync(fs.readFileSync(path.join(root, file)), { level: 9 }).length);
  }
  return new Map([...shares].sort((a, b) => b[1] - a[1]));
}

const CONSUMER = `import { openSqliteStore, type SqliteStore } from 'pidfence/sqlite';
import type { PostgresStore, PostgresTarget } from 'pidfence/postgres';
import { PidfenceError } from 'pidfence';
import type { RunRecord } from 'pidfence/contract';
import type { DispatchRepository, RunStore } from 'pidfence/store';
import * as controller from 'pidfence/process';
import * as native from 'pidfence/native';
import * as dispatch from 'pidfence/dispatch';
import * as management from 'pidfence/management';
import * as execution from 'pidfence/execution';
import { createMetrics, type Metrics } from 'pidfence/metrics';

export async function firstRun(file: string): Promise<RunRecord | null> {
  const store: SqliteStore = openSqliteStore(file);
  try {
    return await store.runStore.getRun('run-none');
  } finally {
    store.close();
  }
}
export type Targets = PostgresTarget | PostgresStore;
export type Stores = DispatchRepository | RunStore;
export const seen = [PidfenceError, controller, native, dispatch, management, execution, createMetrics];
export type Scraped = Metrics['exposition'];
`;

function tsconfig(moduleResolution: 'node16' | 'node10'): object {
  return {
    compilerOptions: {
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      target: 'ES2022',
      lib: ['ES2022'],
      types: ['node'],
      module: moduleResolution === 'node16' ? 'node16' : 'commonjs',
      moduleResolution,
      // The published .d.ts default-import better-sqlite3's `export =` types: a commonjs/node10
      // consumer needs interop, as `tsc --init` sets it (docs/decisions/0080).
      ...(moduleResolution === 'node10' ? { esModuleInterop: true } : {}),
    },
    files: ['consumer.ts'],
  };
}

test('installed without pg: the SQLite path works, pidfence/postgres says how to install pg, and a strict consumer type-checks under node16 and node10', (t) => {
  const { filename } = pack();
  const installed = installPacked(path.join(workDir, filename), path.join(workDir, 'consumer'));
  const project = path.dirname(installed);
  t.false(fs.existsSync(path.join(installed, 'pg')), 'pg is not installed with pidfence');
  t.is(installedVersion(installed, 'better-sqlite3'), installedVersion(path.join(root, 'node_modules'), 'better-sqlite3'), 'the offline install chose the better-sqlite3 this checkout built');

  const script = `
    const { openSqliteStore } = require('pidfence/sqlite');
    const store = openSqliteStore(require('node:path').join(process.cwd(), 'edge.db'));
    store.runStore.getRun('run-none').then((run) => {
      store.close();
      let missing;
      try { require('pidfence/postgres'); } catch (error) { missing = { code: error.code, message: error.message }; }
      process.stdout.write(JSON.stringify({ run, missing }));
    });`;
  const outcome = JSON.parse(run(process.execPath, ['-e', script], project)) as {
    run: unknown;
    missing?: { code: string; message: string };
  };
  t.is(outcome.run, null);
  t.true(fs.existsSync(path.join(project, 'edge.db')), 'the SQLite store made its file');
  t.is(outcome.missing?.code, 'ERR_PIDFENCE_PG_MISSING');
  t.regex(outcome.missing?.message ?? '', /npm install pg/);
  t.notRegex(outcome.missing?.message ?? '', /\n/, 'one sentence, one line');

  fs.writeFileSync(path.join(project, 'consumer.ts'), CONSUMER);
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  for (const resolution of ['node16', 'node10'] as const) {
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig(resolution)));
    const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project, encoding: 'utf8', timeout: 240_000 });
    t.is(result.status, 0, `tsc with moduleResolution ${resolution}:\n${result.stdout}${result.stderr}`);
  }
});
