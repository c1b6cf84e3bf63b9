// design/architecture §2 / design/postgres §D9: the root and edge entries never load `pg` or the PostgreSQL store. Each
// entry is loaded by its package name in a fresh Node process, which then lists every loaded module.
import { spawnSync } from 'node:child_process';

import test from 'ava';

import { packageRoot } from '../../lib/store/migrations';

/** Loads `entry` in a fresh process and returns the files of every module it loaded. */
function modulesLoadedBy(entry: string): string[] {
  const script = `require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
  const result = spawnSync(process.execPath, ['-e', script], { cwd: packageRoot(), encoding: 'utf8', timeout: 30_000 });
  if (result.status !== 0) throw new Error(`loading ${entry} failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as string[];
}

const POSTGRES_MODULE = /[\\/]node_modules[\\/](pg|pg-[^\\/]+|pgpass|postgres-[^\\/]+)[\\/]|[\\/]lib[\\/]store[\\/]postgres[\\/]/;

for (const entry of ['pidfence', 'pidfence/native', 'pidfence/process', 'pidfence/controller', 'pidfence/contract', 'pidfence/sqlite']) {
  test(`${entry} loads no pg module and nothing from lib/store/postgres`, (t) => {
    const loaded = modulesLoadedBy(entry);
    t.true(loaded.some((file) => file.includes('dist')), 'the entry itself was loaded from dist');
    t.deepEqual(loaded.filter((file) => POSTGRES_MODULE.test(file)), []);
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
    t.true(loaded.some((file) => file.includes('dist')), 'the entry itself was loaded from dist');
    t.deepEqual(loaded.filter((file) => POSTGRES_MODULE.test(file) || /better-sqlite3|[\\/]lib[\\/]store[\\/]sqlite[\\/]/.test(file)), []);
  });
}
