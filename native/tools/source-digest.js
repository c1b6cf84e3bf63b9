#!/usr/bin/env node
// The SHA-256 of the native sources an addon is built from: binding.gyp and native/*.{cc,h}
// (not fuzz/ or tools/). binding.gyp bakes it into the binary; the stale-prebuild test
// recomputes it. Each file contributes "<path>\0<bytes>\0" in sorted path order.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

function nativeSourceFiles(root) {
  const native = fs
    .readdirSync(path.join(root, 'native'))
    .filter((name) => /\.(cc|h)$/.test(name))
    .map((name) => `native/${name}`);
  return ['binding.gyp', ...native].sort();
}

function nativeSourceDigest(root) {
  const hash = crypto.createHash('sha256');
  for (const file of nativeSourceFiles(root)) {
    hash.update(file);
    hash.update('\0');
    hash.update(fs.readFileSync(path.join(root, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

module.exports = { nativeSourceDigest, nativeSourceFiles };

if (require.main === module) {
  process.stdout.write(nativeSourceDigest(path.join(__dirname, '..', '..')));
}
