// The package as a new user gets it (docs/decisions/0080, 0223): `npm pack`, then the tarball's file
// list against an allowlist, then installs into temporary projects: without the optional peers (the
// SQLite path works, each entry that needs a peer says what to install) and with pg only (the
// control plane and metrics say so too). The consumer's types: consumer-types.test.ts.
// Offline: npm installs from its local cache, with scripts off; better-sqlite3's compiled binary
// is copied from this checkout (its prebuilt download is unreachable here, a source build slow).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';

import test, { type ExecutionContext } from 'ava';
import * as ts from 'typescript';

import { packageRoot } from '../../lib/store/migrations';
import {
  INSTALL_LOG,
  installedVersion,
  installPacked,
  packInto,
  runChecked as run,
  type PackResult,
} from '../helpers/packed-install';

const root = packageRoot();
/** The issue's size target (a figure to report, like a benchmark's); the guards below only catch a stray. */
const GLIBC_PACKED_TARGET_BYTES = 350 * 1024;
/**
 * Tripwires, not budgets (docs/decisions/0444): the allowed paths keep a build tree out; these catch
 * a stray that matches an allowed path, one large file or many. The largest file we ship is an
 * addon prebuild (about 200 kB); the whole packed about 1.0 MB.
 */
const PACKED_GUARD_BYTES = 1536 * 1024;
const FILE_GUARD_BYTES = 384 * 1024;

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
  /^native\/launcher\/[^/]+\.(c|h)$/,
  /^native\/tools\/source-digest\.js$/,
  /^prebuilds\/linux-(x64|arm64)\/pidfence\.(glibc|musl)\.node$/,
  /^prebuilds\/linux-(x64|arm64)\/pidfence-launcher$/,
  /^docs\/(benchmarks|gates|cli|postgres|cluster|operations)\.md$/,
  /^docs\/prometheus-rules\.yml$/,
  /^docs\/status-page\.png$/,
  /^docs\/decisions\/\d{4}-[a-z0-9-]+\.md$/,
  /^docs\/design\/[a-zA-Z0-9-]+\.md$/,
];

test('the tarball holds only allowed files, LICENSE, README and every doc it links, and no source map', (t) => {
  const { files, size, unpackedSize } = pack();
  const paths = files.map((file) => file.path);
  t.deepEqual(
    paths.filter((file) => !ALLOWED.some((pattern) => pattern.test(file))),
    [],
  );
  t.deepEqual(
    paths.filter((file) => file.endsWith('.map')),
    [],
  );
  for (const required of ['LICENSE', 'README.md', 'package.json', 'dist/lib/index.js', 'dist/lib/index.d.ts']) {
    t.true(paths.includes(required), `${required} is in the tarball`);
  }
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const linked = [...readme.matchAll(/\bdocs\/[\w./-]+/g)].map((match) => match[0].replace(/[.]$/, ''));
  t.true(linked.length > 0, 'the README links some docs');
  for (const doc of linked) {
    // A link may name a whole file, a folder or a decision by its number (`docs/decisions/0040`).
    t.true(
      paths.some((file) => file.startsWith(doc)),
      `${doc} is in the tarball`,
    );
  }
  for (const prebuild of ['prebuilds/linux-x64/pidfence.glibc.node', 'prebuilds/linux-arm64/pidfence.glibc.node']) {
    t.true(paths.includes(prebuild), `${prebuild} is in the tarball`);
  }
  t.log(
    `packed ${(size / 1024).toFixed(1)} kB, unpacked ${(unpackedSize / 1024).toFixed(1)} kB, ${files.length} files`,
  );
  // Where the packed bytes go (docs/decisions/0082): each file gzipped on its own, summed per share.
  const shares = packedShares(paths);
  t.log(
    `shares, gzip -9 per file: ${[...shares].map(([share, bytes]) => `${share} ${(bytes / 1024).toFixed(1)} kB`).join(', ')}`,
  );
  const withoutMusl = size - (shares.get('musl prebuilds') ?? 0);
  t.log(
    `packed without musl ≈ ${(withoutMusl / 1024).toFixed(1)} kB: ${withoutMusl <= GLIBC_PACKED_TARGET_BYTES ? 'PASS' : 'MISS'} against the ${GLIBC_PACKED_TARGET_BYTES / 1024} kB target`,
  );
  t.true(size <= PACKED_GUARD_BYTES, `packed ${size} B: something large slipped into the tarball`);
  t.deepEqual(
    files.filter((file) => file.size > FILE_GUARD_BYTES).map((file) => `${file.path} (${file.size} B)`),
    [],
    'no single file is larger than a prebuild could plausibly be',
  );
});

/** The relative modules a declaration file imports, as tarball paths (`./x` is `x.d.ts` or `x/index.d.ts`). */
function declarationImports(file: string): Array<{ candidates: string[]; specifier: string }> {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((imported) => imported.fileName)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => {
      const target = path.posix.join(path.posix.dirname(file), specifier.replace(/\.js$/, ''));
      return { specifier, candidates: [`${target}.d.ts`, `${target}/index.d.ts`] };
    });
}

test('the declarations the tarball holds are closed: each relative import of a shipped .d.ts is shipped, and the CLI, the web pages and the SQL texts ship none (docs/decisions/0392)', (t) => {
  const paths = new Set(pack().files.map((file) => file.path));
  const declarations = [...paths].filter((file) => file.endsWith('.d.ts'));
  const missing = declarations.flatMap((file) =>
    declarationImports(file)
      .filter(({ candidates }) => !candidates.some((candidate) => paths.has(candidate)))
      .map(({ specifier }) => `${file} imports ${specifier}`),
  );
  t.deepEqual(missing, []);
  t.deepEqual(
    declarations.filter((file) => /^dist\/lib\/(cli|web)\/|-statements\.d\.ts$/.test(file)),
    [],
  );
  t.log(`${declarations.length} declaration files shipped`);
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
    shares.set(
      share,
      (shares.get(share) ?? 0) + zlib.gzipSync(fs.readFileSync(path.join(root, file)), { level: 9 }).length,
    );
  }
  return new Map([...shares].sort((a, b) => b[1] - a[1]));
}

/** What `require(entry)` threw in `project`: its code and message, or null when it loaded. */
function requireFailure(project: string, entry: string): { code: string; message: string } | null {
  const script = `try { require(${JSON.stringify(entry)}); process.stdout.write('null'); } catch (error) { process.stdout.write(JSON.stringify({ code: error.code, message: error.message })); }`;
  return JSON.parse(run(process.execPath, ['-e', script], project)) as { code: string; message: string } | null;
}

function saysWhatToInstall(
  t: ExecutionContext,
  failure: { code: string; message: string } | null,
  code: string,
  peer: string,
): void {
  t.is(failure?.code, code);
  t.true(failure?.message.includes(`npm install ${peer}`), failure?.message);
  t.notRegex(failure?.message ?? '', /\n/, 'one sentence, one line');
}

test('installed without its optional peers: no EBADENGINE warning, the SQLite path works, and pidfence/postgres, pidfence/cluster and pidfence/metrics each say what to install', (t) => {
  const { filename } = pack();
  const installed = installPacked(path.join(workDir, filename), path.join(workDir, 'consumer'));
  const project = path.dirname(installed);
  for (const peer of ['pg', 'fastify', 'prom-client'])
    t.false(fs.existsSync(path.join(installed, peer)), `${peer} is not installed with pidfence`);
  t.notRegex(
    fs.readFileSync(path.join(project, INSTALL_LOG), 'utf8'),
    /EBADENGINE/,
    `no package of the install wants another Node (engines ${JSON.stringify(packageEngines())})`,
  );
  t.is(
    installedVersion(installed, 'better-sqlite3'),
    installedVersion(path.join(root, 'node_modules'), 'better-sqlite3'),
    'the offline install chose the better-sqlite3 this checkout built',
  );

  const script = `
    const { openSqliteStore } = require('pidfence/sqlite');
    const store = openSqliteStore(require('node:path').join(process.cwd(), 'edge.db'));
    store.runStore.getRun('run-none').then((run) => {
      store.close();
      process.stdout.write(JSON.stringify({ run }));
    });`;
  t.deepEqual(JSON.parse(run(process.execPath, ['-e', script], project)), { run: null });
  t.true(fs.existsSync(path.join(project, 'edge.db')), 'the SQLite store made its file');
  saysWhatToInstall(t, requireFailure(project, 'pidfence/postgres'), 'ERR_PIDFENCE_PG_MISSING', 'pg');
  saysWhatToInstall(t, requireFailure(project, 'pidfence/cluster'), 'ERR_PIDFENCE_PG_MISSING', 'pg');
  saysWhatToInstall(t, requireFailure(project, 'pidfence/metrics'), 'ERR_PIDFENCE_PROM_CLIENT_MISSING', 'prom-client');
  t.is(requireFailure(project, 'pidfence/execution'), null, 'the edge entries load');
});

test('installed with pg only: the control plane says to install fastify, and metrics to install prom-client, as one line and exit 3 from the CLI', async (t) => {
  const { filename } = pack();
  const installed = installPacked(path.join(workDir, filename), path.join(workDir, 'with-pg'), [
    `pg@${installedVersion(path.join(root, 'node_modules'), 'pg')}`,
  ]);
  const project = path.dirname(installed);
  t.is(requireFailure(project, 'pidfence/cluster'), null, 'pidfence/cluster loads with pg alone');
  const script = `
    require('pidfence/cluster').startControlPlane({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', tls: { cert: 'x', key: 'x', ca: 'x' } })
      .then(() => process.stdout.write('null'), (error) => process.stdout.write(JSON.stringify({ code: error.code, message: error.message })));`;
  saysWhatToInstall(
    t,
    JSON.parse(run(process.execPath, ['-e', script], project)) as { code: string; message: string },
    'ERR_PIDFENCE_FASTIFY_MISSING',
    'fastify',
  );

  fs.writeFileSync(path.join(project, 'dummy.pem'), 'not a certificate\n');
  const cli = (args: readonly string[]) =>
    spawnSync('npx', ['pidfence', ...args], { cwd: project, encoding: 'utf8', timeout: 120_000 });
  const plane = cli([
    'control-plane',
    '--db',
    'postgres://nobody@127.0.0.1:1/none',
    '--cert',
    'dummy.pem',
    '--key',
    'dummy.pem',
    '--ca',
    'dummy.pem',
  ]);
  t.is(plane.status, 3, plane.stderr);
  t.regex(
    plane.stderr,
    /^pidfence: the control plane .*needs the 'fastify' package.*`npm install fastify`\. \(ERR_PIDFENCE_FASTIFY_MISSING\)\n$/,
  );
  const supervise = cli(['supervise', '--db', path.join(project, 'edge.db'), '--metrics-port', '0']);
  t.is(supervise.status, 3, supervise.stderr);
  t.regex(
    supervise.stderr,
    /^pidfence: pidfence\/metrics .*needs the 'prom-client' package.*`npm install prom-client`\. \(ERR_PIDFENCE_PROM_CLIENT_MISSING\)\n$/,
  );
});

function packageEngines(): unknown {
  return (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: unknown }).engines;
}
