// The musl prebuilds are named as prebuildify --tag-libc names them and are picked by the loader's
// own libc check (docs/decisions/0081); native/tools/check-musl.sh dlopens the x64 one under musl.
import * as fs from 'node:fs';
import * as path from 'node:path';

import test from 'ava';

import { runtimeLibc } from '../../lib/native/loader';
import { packageRoot } from '../../lib/store/migrations';

const ELF_MACHINE = { x64: 0x3e, arm64: 0xb7 } as const;

for (const arch of ['x64', 'arm64'] as const) {
  test(`the linux-${arch} musl prebuild is a shared object for ${arch}`, (t) => {
    const file = path.join(packageRoot(), 'prebuilds', `linux-${arch}`, 'pidfence.musl.node');
    const header = fs.readFileSync(file).subarray(0, 20);
    t.is(header.subarray(0, 4).toString('latin1'), '\x7fELF');
    t.is(header.readUInt16LE(16), 3, 'ET_DYN');
    t.is(header.readUInt16LE(18), ELF_MACHINE[arch]);
  });
}

test('the loader tells glibc on this glibc machine (musl would pick pidfence.musl.node)', (t) => {
  const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } }).header
    ?.glibcVersionRuntime;
  t.is(runtimeLibc(), glibc === undefined ? 'musl' : 'glibc');
});
