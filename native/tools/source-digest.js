#!/usr/bin/env node
// SHA-256 digests of native sources. The addon's: binding.gyp without its launcher target, and
// native/*.{cc,h} (not fuzz/, tools/ or launcher/). The launcher's (docs/decisions/0151):
// native/launcher/*.{c,h}. Each is baked into its binary; the stale-prebuild tests recompute them.
// Each file contributes "<path>\0<bytes>\0" in sorted path order. `source-digest.js launcher`
// prints the launcher's digest, no argument the addon's.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

/** binding.gyp's launcher target sits between these comment lines; the addon digest leaves it out. */
const LAUNCHER_TARGET = /^ *# launcher target: begin[^\n]*\n[\s\S]*?^ *# launcher target: end\n/m;

function nativeSourceFiles(root) {
  const native = fs
    .readdirSync(path.join(root, 'native'))
    .filter((name) => /\.(cc|h)$/.test(name))
    .map((name) => `native/${name}`);
  return ['binding.gyp', ...native].sort();
}

function launcherSourceFiles(root) {
  return fs
    .readdirSync(path.join(root, 'native', 'launcher'))
    .filter((name) => /\.(c|h)$/.test(name))
    .map((name) => `native/launcher/${name}`)
    .sort();
}

function digestOf(root, files, bytesOf) {
  const hash = crypto.createHash('sha256');
  for (const file of files) {
    hash.update(file);
    hash.update('\0');
    hash.update(bytesOf(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

function nativeSourceDigest(root) {
  return digestOf(root, nativeSourceFiles(root), (file) => {
    const bytes = fs.readFileSync(path.join(root, file));
    return file === 'binding.gyp' ? Buffer.from(bytes.toString('utf8').replace(LAUNCHER_TARGET, ''), 'utf8') : bytes;
  });
}

function launcherSourceDigest(root) {
  return digestOf(root, launcherSourceFiles(root), (file) => fs.readFileSync(path.join(root, file)));
}

module.exports = { nativeSourceDigest, nativeSourceFiles, launcherSourceDigest, launcherSourceFiles };

if (require.main === module) {
  const root = path.join(__dirname, '..', '..');
  process.stdout.write(process.argv[2] === 'launcher' ? launcherSourceDigest(root) : nativeSourceDigest(root));
}
