// design/architecture §2: dispatch imports process, contract and the store interfaces — never a concrete store —
// and nothing below it imports dispatch. Loading pidfence/dispatch loads neither pg nor SQLite.
import { execFileSync } from 'node:child_process';
import path from 'node:path';

import test from 'ava';

import { importsOf, LIB, sources } from '../helpers/imports';

test('lib/dispatch imports only base, process, contract, the store interfaces and node built-ins', (t) => {
  const allowed = [/^node:/, /^\.\/[a-z-]+$/, /^\.\.\/base\//, /^\.\.\/process\/index$/, /^\.\.\/contract\/index$/, /^\.\.\/store\/(dispatch-repository|run-store)$/];
  const files = sources(path.join(LIB, 'dispatch'));
  t.true(files.length >= 7);
  for (const file of files) {
    for (const specifier of importsOf(file)) {
      t.true(allowed.some((rule) => rule.test(specifier)), `${path.basename(file)} imports ${specifier}`);
    }
  }
});

test('no lower layer (native, process, contract, store) imports dispatch', (t) => {
  const lower = ['native', 'process', 'contract', 'store'].flatMap((layer) => sources(path.join(LIB, layer)));
  t.true(lower.length > 10);
  for (const file of lower) {
    t.false(importsOf(file).some((specifier) => /(^|\/)dispatch(\/|$)/.test(specifier)), `${path.relative(LIB, file)} imports dispatch`);
  }
});

test('loading pidfence/dispatch in a fresh process loads neither pg nor better-sqlite3', (t) => {
  const entry = path.resolve(__dirname, '..', '..', 'lib', 'dispatch', 'index.js');
  const script = `require(${JSON.stringify(entry)}); console.log(JSON.stringify(Object.keys(require.cache)))`;
  const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
  t.true(loaded.some((file) => file.endsWith(path.join('dispatch', 'index.js'))));
  t.false(loaded.some((file) => file.includes(`${path.sep}node_modules${path.sep}pg${path.sep}`)), 'pg not loaded');
  t.false(loaded.some((file) => file.includes('better-sqlite3')), 'SQLite driver not loaded');
  t.false(loaded.some((file) => file.includes(`${path.sep}store${path.sep}sqlite${path.sep}`)), 'no concrete store loaded');
});
