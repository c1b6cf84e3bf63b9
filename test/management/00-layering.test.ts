// design/architecture §2: management imports base, contract and the store interfaces (never a concrete store),
// and nothing below it (native, process, contract, store, dispatch) imports management.
import path from 'node:path';

import test from 'ava';

import { importsLayer, importsOf, LIB, sources } from '../helpers/imports';

test('lib/management imports only base, contract, the store interfaces and node built-ins', (t) => {
  const allowed = [/^node:/, /^\.\/[a-z-]+$/, /^\.\.\/base\//, /^\.\.\/contract\/index$/, /^\.\.\/store\/management-store$/];
  const files = sources(path.join(LIB, 'management'));
  t.true(files.length >= 6);
  for (const file of files) {
    for (const specifier of importsOf(file)) t.true(allowed.some((rule) => rule.test(specifier)), `${path.basename(file)} imports ${specifier}`);
  }
});

test('no lower layer imports management', (t) => {
  const lower = ['native', 'process', 'contract', 'store', 'dispatch'].flatMap((layer) => sources(path.join(LIB, layer)));
  t.true(lower.length > 10);
  for (const file of lower) t.false(importsOf(file).some((specifier) => importsLayer(file, specifier, 'management')), `${path.relative(LIB, file)} imports management`);
});
