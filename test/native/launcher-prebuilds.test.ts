// The committed launcher prebuilds (docs/decisions/0151) are built from the current
// native/launcher sources: a change there without `npm run prebuilds:launcher` fails here.
// Each is a static executable for its architecture; the loader finds this host's first.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import test from 'ava';

import { launcherCandidates, launcherPath } from '../../lib/native/index';

const root = path.resolve(__dirname, '..', '..', '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
const { launcherSourceDigest } = require(path.join(root, 'native', 'tools', 'source-digest.js')) as {
  launcherSourceDigest(root: string): string;
};
const digest = launcherSourceDigest(root);
const rebuild = 'stale launcher prebuild: run `npm run prebuilds:launcher` and commit prebuilds/';

/** ELF e_machine for each shipped architecture. */
const MACHINES = { 'linux-x64': 62, 'linux-arm64': 183 } as const;
const PT_INTERP = 3;

/** True when the ELF file has no program interpreter (statically linked). */
function isStatic(bytes: Buffer): boolean {
  const phoff = Number(bytes.readBigUInt64LE(0x20));
  const phentsize = bytes.readUInt16LE(0x36);
  const phnum = bytes.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i += 1) if (bytes.readUInt32LE(phoff + i * phentsize) === PT_INTERP) return false;
  return true;
}

for (const [platformArch, machine] of Object.entries(MACHINES)) {
  test(`prebuilds/${platformArch}/pidfence-launcher is a static executable for its architecture carrying the current launcher source digest`, (t) => {
    const file = path.join(root, 'prebuilds', platformArch, 'pidfence-launcher');
    t.true(fs.existsSync(file), `${file} is missing: ${rebuild}`);
    const bytes = fs.readFileSync(file);
    t.is(bytes.subarray(0, 4).toString('latin1'), '\x7fELF');
    t.is(bytes.readUInt16LE(0x12), machine, 'built for its architecture (check the cross compiler)');
    t.true(isStatic(bytes), 'statically linked: one binary serves glibc and musl systems');
    t.true((fs.statSync(file).mode & 0o111) !== 0, 'executable');
    t.true(bytes.includes(Buffer.from(digest, 'ascii')), rebuild);
  });
}

test('the launcher this host uses reports the current source digest, and the loader finds the prebuild first', (t) => {
  t.regex(digest, /^[0-9a-f]{64}$/);
  t.is(launcherPath(), launcherCandidates()[0] ?? '');
  t.is(execFileSync(launcherPath(), ['--source-digest'], { encoding: 'utf8' }).trim(), digest, rebuild);
});

test("the addon's source digest leaves the launcher out: its sources and binding.gyp target do not change it", (t) => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
  const { nativeSourceFiles, nativeSourceDigest } = require(path.join(root, 'native', 'tools', 'source-digest.js')) as {
    nativeSourceFiles(root: string): string[];
    nativeSourceDigest(root: string): string;
  };
  t.deepEqual(
    nativeSourceFiles(root).filter((file) => file.includes('launcher')),
    [],
  );
  const gyp = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8');
  t.true(gyp.includes('"target_name": "pidfence-launcher"'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
  const copy = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'pidfence-digest-'));
  t.teardown(() => fs.rmSync(copy, { recursive: true, force: true }));
  fs.mkdirSync(path.join(copy, 'native'));
  for (const file of nativeSourceFiles(root)) fs.copyFileSync(path.join(root, file), path.join(copy, file));
  fs.writeFileSync(
    path.join(copy, 'binding.gyp'),
    gyp.replace(/"native\/launcher\/order\.c",/, '"native/launcher/order.c", "native/launcher/extra.c",'),
  );
  t.is(
    nativeSourceDigest(copy),
    nativeSourceDigest(root),
    'a change inside the launcher target leaves the addon digest alone',
  );
});

test("binding.gyp's launcher target builds every C file of native/launcher/, so `npm run build:native` links what the prebuilds do", (t) => {
  const gyp = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8');
  const listed = [...gyp.matchAll(/"(native\/launcher\/[^"]+\.c)"/g)].map((match) => match[1]).sort();
  const present = fs
    .readdirSync(path.join(root, 'native', 'launcher'))
    .filter((name) => name.endsWith('.c'))
    .map((name) => `native/launcher/${name}`)
    .sort();
  t.deepEqual(listed, present);
});

test('without a prebuild or a local build, finding the launcher throws ERR_PIDFENCE_LAUNCHER_UNAVAILABLE with what to do', (t) => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
  const copy = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'pidfence-no-launcher-'));
  t.teardown(() => fs.rmSync(copy, { recursive: true, force: true }));
  fs.cpSync(path.join(root, 'dist', 'lib'), path.join(copy, 'dist', 'lib'), { recursive: true });
  const entry = path.join(copy, 'dist', 'lib', 'native', 'launcher-binary.js');
  const script = `try { require(${JSON.stringify(entry)}).launcherPath(); } catch (e) { process.stdout.write(JSON.stringify({ code: e.code, message: e.message })); }`;
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as {
    code: string;
    message: string;
  };
  t.is(out.code, 'ERR_PIDFENCE_LAUNCHER_UNAVAILABLE');
  t.regex(out.message, /no native launcher .*Reinstall pidfence, or build it from source with `npm run build:native`/);
});
