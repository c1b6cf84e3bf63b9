// design/architecture §2: imports point one way. Every file under lib/ may import only the layers listed for
// its own layer; the two stores never import each other, and nothing below cli imports cli.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { LIB, importsOf, sources } from '../helpers/imports';

/** The layer of a file: lib/<dir>, with the two stores told apart. */
function layerOf(file: string): string {
  const relative = path.relative(LIB, file).split(path.sep);
  if (relative.length === 1) return 'root';
  if (relative[0] === 'store' && (relative[1] === 'sqlite' || relative[1] === 'postgres')) return `store/${relative[1]}`;
  return relative[0] ?? 'root';
}

// Which layers each layer may import (its own layer is always allowed).
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  base: [],
  native: ['base'],
  contract: ['base'],
  process: ['base', 'native'],
  store: ['base', 'contract'],
  'store/sqlite': ['base', 'contract', 'store'],
  'store/postgres': ['base', 'contract', 'store'],
  dispatch: ['base', 'contract', 'native', 'process', 'store'],
  management: ['base', 'contract', 'dispatch', 'store'],
  execution: ['base', 'contract', 'native', 'process', 'store', 'store/sqlite', 'store/postgres', 'dispatch', 'management'],
  // prom-client's only home (docs/decisions/0110): fed by the dispatch observer, loaded on demand.
  metrics: ['base', 'contract', 'dispatch'],
  // The status page and the supervise metrics server (docs/decisions/0111): reads through management.
  web: ['base', 'contract', 'store', 'management'],
  cluster: ['base', 'contract', 'native', 'process', 'store', 'store/sqlite', 'store/postgres', 'dispatch', 'management', 'execution', 'metrics', 'web'],
  cli: ['base', 'contract', 'native', 'process', 'store', 'store/sqlite', 'store/postgres', 'dispatch', 'management', 'execution', 'cluster', 'metrics', 'web'],
  root: ['base', 'native'],
};

function importedLayer(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const target = path.resolve(path.dirname(file), specifier);
  if (!target.startsWith(LIB + path.sep)) return 'outside lib';
  return layerOf(target.endsWith('.ts') ? target : `${target}.ts`);
}

test('every import under lib/ points down the layer order of design/architecture §2', (t) => {
  const violations: string[] = [];
  let checked = 0;
  for (const file of sources(LIB)) {
    const layer = layerOf(file);
    const allowed = ALLOWED[layer];
    if (allowed === undefined) {
      violations.push(`${path.relative(LIB, file)}: layer "${layer}" has no rule in this test`);
      continue;
    }
    for (const specifier of importsOf(file)) {
      const target = importedLayer(file, specifier);
      if (target === null) continue;
      checked++;
      if (target !== layer && !allowed.includes(target)) violations.push(`${path.relative(LIB, file)} imports ${target} (${specifier})`);
    }
  }
  t.deepEqual(violations, []);
  t.true(checked > 100, `checked ${checked} relative imports`);
});

test('the rule is live: an upward import would be reported', (t) => {
  const file = path.join(LIB, 'native', 'index.ts');
  t.is(importedLayer(file, '../process/index'), 'process');
  t.false(ALLOWED.native?.includes('process'));
  t.is(importedLayer(path.join(LIB, 'store', 'sqlite', 'index.ts'), '../postgres/index'), 'store/postgres');
  t.false(ALLOWED['store/sqlite']?.includes('store/postgres'));
});

test('lib/metrics (prom-client) is only ever imported on demand: no static import of it outside its folder (docs/decisions/0110)', (t) => {
  const staticImports: string[] = [];
  let dynamic = 0;
  for (const file of sources(LIB)) {
    if (layerOf(file) === 'metrics') continue;
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/\b(?:import|export)(\s+type)?\s[^;]*?\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g)) {
      const specifier = match[2] ?? match[3] ?? '';
      if (importedLayer(file, specifier) !== 'metrics' && specifier !== 'prom-client') continue;
      // `import type` is erased by the compiler: it loads nothing.
      if (match[3] !== undefined) dynamic++;
      else if (match[1] === undefined) staticImports.push(`${path.relative(LIB, file)}: ${specifier}`);
    }
  }
  t.deepEqual(staticImports, []);
  t.true(dynamic >= 2, `the control plane and supervise load metrics on demand (${dynamic} found)`);
});
