// design/architecture §2 / design/postgres §D9: the root and edge entries never load `pg` or the PostgreSQL store. Each
// entry is loaded by its package name in a fresh Node process, which then lists every loaded module.
// docs/decisions/0110: no entry, and no `pidfence supervise` without --metrics-port, loads prom-client.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { signalVerified } from '../../lib/native/index';
import { packageRoot } from '../../lib/store/migrations';
import { spawnJob } from '../helpers/processes';

/** Loads `entry` in a fresh process and returns the files of every module it loaded. */
function modulesLoadedBy(entry: string): string[] {
  const script = `require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
  const result = spawnSync(process.execPath, ['-e', script], { cwd: packageRoot(), encoding: 'utf8', timeout: 30_000 });
  if (result.status !== 0) throw new Error(`loading ${entry} failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as string[];
}

const POSTGRES_MODULE =
  /[\\/]node_modules[\\/](pg|pg-[^\\/]+|pgpass|postgres-[^\\/]+)[\\/]|[\\/]lib[\\/]store[\\/]postgres[\\/]/;

for (const entry of [
  'pidfence',
  'pidfence/native',
  'pidfence/process',
  'pidfence/controller',
  'pidfence/contract',
  'pidfence/sqlite',
]) {
  test(`${entry} loads no pg module and nothing from lib/store/postgres`, (t) => {
    const loaded = modulesLoadedBy(entry);
    t.true(
      loaded.some((file) => file.includes('dist')),
      'the entry itself was loaded from dist',
    );
    t.deepEqual(
      loaded.filter((file) => POSTGRES_MODULE.test(file)),
      [],
    );
  });
}

test('pidfence/postgres does load pg (the check above can see it)', (t) => {
  const loaded = modulesLoadedBy('pidfence/postgres');
  t.true(loaded.some((file) => /[\\/]node_modules[\\/]pg[\\/]/.test(file)));
  t.true(loaded.some((file) => /[\\/]dist[\\/]lib[\\/]store[\\/]postgres[\\/]index\.js$/.test(file)));
});

for (const entry of ['pidfence/dispatch', 'pidfence/management', 'pidfence/store']) {
  test(`${entry} loads neither pg nor better-sqlite3 nor a concrete store`, (t) => {
    const loaded = modulesLoadedBy(entry);
    t.true(
      loaded.some((file) => file.includes('dist')),
      'the entry itself was loaded from dist',
    );
    t.deepEqual(
      loaded.filter(
        (file) => POSTGRES_MODULE.test(file) || /better-sqlite3|[\\/]lib[\\/]store[\\/]sqlite[\\/]/.test(file),
      ),
      [],
    );
  });
}

const METRICS_MODULE = /[\\/]node_modules[\\/]prom-client[\\/]|[\\/]dist[\\/]lib[\\/]metrics[\\/]/;

for (const entry of [
  'pidfence',
  'pidfence/native',
  'pidfence/process',
  'pidfence/contract',
  'pidfence/sqlite',
  'pidfence/store',
  'pidfence/dispatch',
  'pidfence/management',
  'pidfence/execution',
  'pidfence/cluster',
]) {
  test(`${entry} loads no prom-client and nothing from lib/metrics`, (t) => {
    const loaded = modulesLoadedBy(entry);
    t.true(
      loaded.some((file) => file.includes('dist')),
      'the entry itself was loaded from dist',
    );
    t.deepEqual(
      loaded.filter((file) => METRICS_MODULE.test(file)),
      [],
    );
  });
}

test('pidfence/metrics does load prom-client (the check above can see it)', (t) => {
  const loaded = modulesLoadedBy('pidfence/metrics');
  t.true(loaded.some((file) => /[\\/]node_modules[\\/]prom-client[\\/]index\.js$/.test(file)));
});

/** `pidfence supervise` on a fresh SQLite file until ready, then SIGTERM; the modules it had loaded when it exited. */
async function superviseModules(
  t: import('ava').ExecutionContext,
  extra: readonly string[],
): Promise<{ modules: string[]; lines: string[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-closure-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const preload = path.join(dir, 'dump.js');
  const out = path.join(dir, 'modules.json');
  writeFileSync(
    preload,
    `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(Object.keys(require.cache))));\n`,
  );
  const main = path.resolve(__dirname, '..', '..', 'lib', 'cli', 'main.js');
  const job = spawnJob(t, process.execPath, [
    '-r',
    preload,
    main,
    'supervise',
    '--db',
    path.join(dir, 'p.db'),
    ...extra,
  ]);
  t.teardown(() => job.stop());
  await job.waitForLine(/^pidfence supervise: ready$/, 20_000);
  t.is(signalVerified(job.identity, 'SIGTERM', { group: false }).kind, 'signalled');
  t.is((await job.exited).code, 0);
  return { modules: JSON.parse(readFileSync(out, 'utf8')) as string[], lines: job.lines };
}

test('pidfence supervise without --metrics-port never loads prom-client; with it, it does', async (t) => {
  const plain = await superviseModules(t, []);
  t.true(
    plain.modules.some((file) => /[\\/]dist[\\/]lib[\\/]execution[\\/]application\.js$/.test(file)),
    'the runner itself was loaded',
  );
  t.deepEqual(
    plain.modules.filter((file) => METRICS_MODULE.test(file)),
    [],
  );
  t.false(
    plain.modules.some((file) => /[\\/]dist[\\/]lib[\\/]web[\\/]/.test(file)),
    'nor the metrics server',
  );
  const metered = await superviseModules(t, ['--metrics-port', '0']);
  t.true(metered.modules.some((file) => /[\\/]node_modules[\\/]prom-client[\\/]/.test(file)));
  t.true(
    metered.lines.some((line) => /^pidfence supervise: metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/.test(line)),
    metered.lines.join('\n'),
  );
});
