// The committed prebuilds (design/architecture §3, docs/decisions/0003) are built from the current
// native sources: a change to binding.gyp or native/*.{cc,h} without `npm run prebuilds:all`
// fails here. Excluded from the arm64 run (it spawns a node child; see test-arm64.sh).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import test from 'ava';

import type { NativeAddon } from '../../lib/native/addon-contract';

const root = path.resolve(__dirname, '..', '..', '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
const { nativeSourceDigest } = require(path.join(root, 'native', 'tools', 'source-digest.js')) as {
  nativeSourceDigest(root: string): string;
};
const digest = nativeSourceDigest(root);
const rebuild = 'stale prebuild: run `npm run prebuilds:all` and commit prebuilds/';

// The platforms we ship; each directory must hold exactly the file name the loader looks for.
const shipped = ['linux-x64', 'linux-arm64'] as const;
const prebuildFile = (platformArch: string) => path.join(root, 'prebuilds', platformArch, 'pidfence.glibc.node');

test('the current native source digest is a SHA-256', (t) => {
  t.regex(digest, /^[0-9a-f]{64}$/);
});

for (const platformArch of shipped) {
  test(`prebuilds/${platformArch} holds its glibc and musl addons, each carrying the current source digest`, (t) => {
    const dir = path.join(root, 'prebuilds', platformArch);
    const files = ['pidfence.glibc.node', 'pidfence.musl.node']; // docs/decisions/0081
    // Beside them, the launcher (docs/decisions/0151; its own test is launcher-prebuilds.test.ts).
    t.deepEqual(
      fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [],
      ['pidfence-launcher', ...files],
      'run `npm run prebuilds:all`',
    );
    // Byte search rather than loading: works for the arm64 and musl files on a glibc x64 host too.
    for (const file of files) {
      const bytes = fs.readFileSync(path.join(dir, file));
      t.true(bytes.includes(Buffer.from(digest, 'ascii')), `${file}: ${rebuild}`);
    }
  });
}

test('the prebuild for this host, loaded by path, reports the current source digest', (t) => {
  const platformArch = `${process.platform}-${process.arch}`;
  if (!(shipped as readonly string[]).includes(platformArch)) {
    t.fail(`no prebuild is shipped for ${platformArch}`);
    return;
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
  const addon = require(prebuildFile(platformArch)) as NativeAddon;
  const info = addon.buildInfo();
  t.is(info.sourceDigest, digest, rebuild);
  t.is(info.arch, process.arch);
});

test('with PIDFENCE_ADDON_PATH a fresh process loads exactly that prebuild, not stale', (t) => {
  const file = prebuildFile(`${process.platform}-${process.arch}`);
  const entry = path.join(root, 'dist', 'lib', 'native', 'index.js');
  const script = `
    const native = require(${JSON.stringify(entry)});
    const info = native.buildInfo();
    const addons = Object.keys(require.cache).filter((name) => name.endsWith('.node'));
    process.stdout.write(JSON.stringify({ status: native.addonStatus(), digest: info.sourceDigest, addons }));
  `;
  const result = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, PIDFENCE_ADDON_PATH: file },
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.is(result.status, 0, result.stderr);
  const out = JSON.parse(result.stdout) as { status: unknown; digest: string; addons: string[] };
  t.deepEqual(out.status, { loaded: true, source: 'override', stale: false });
  t.is(out.digest, digest, rebuild);
  t.deepEqual(out.addons, [file]);
});
