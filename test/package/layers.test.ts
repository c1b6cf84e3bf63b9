// design/architecture §2: imports point one way. This is the one layering test: every file under lib/
// may import only the layers listed for its own layer, the map lists exactly the edges the code
// uses (a loosened map fails too), the two stores never import each other, and dispatch and
// management see the store interfaces only, and no file imports itself back through others (no circles). Tests and benchmarks point one way as well: a helper never
// imports a suite, and a benchmark imports only the shared harness in test/helpers.
// docs/decisions/0110: prom-client (lib/metrics) is imported on demand only. docs/decisions/0410: SQL
// statement text lives only in lib/store's *-statements.ts files.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';
import * as ts from 'typescript';

import { LIB, importsOf, sources } from '../helpers/imports';

const ROOT = path.dirname(LIB);
/** The store interfaces (types only, published as pidfence/store); the rest of lib/store is what both stores share. */
const STORE_INTERFACES = new Set([
  'dispatch-repository',
  'run-store',
  'execution-store',
  'runner-store',
  'management-store',
  'index',
]);

/** The layer of a file: lib/<dir>, with the two stores and the store interfaces told apart. */
function layerOf(file: string): string {
  const relative = path.relative(LIB, file).split(path.sep);
  if (relative.length === 1) return 'root';
  if (relative[0] === 'store' && (relative[1] === 'sqlite' || relative[1] === 'postgres'))
    return `store/${relative[1]}`;
  if (relative[0] === 'store' && relative.length === 2 && STORE_INTERFACES.has(path.basename(relative[1]!, '.ts')))
    return 'store/interfaces';
  return relative[0] ?? 'root';
}

// Which other layers each layer imports: exactly these (its own layer is always allowed).
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  base: [],
  native: ['base'],
  contract: ['base'],
  process: ['base', 'native'],
  'store/interfaces': ['contract'],
  store: ['base', 'contract'],
  // The SQLite store clock reads the boot clock (docs/decisions/0160).
  'store/sqlite': ['base', 'contract', 'native', 'store', 'store/interfaces'],
  'store/postgres': ['base', 'contract', 'store', 'store/interfaces'],
  dispatch: ['base', 'contract', 'process', 'store/interfaces'],
  management: ['base', 'contract', 'store/interfaces'],
  execution: ['base', 'contract', 'dispatch', 'native', 'process', 'store/interfaces'],
  // prom-client's only home (docs/decisions/0110): fed by the dispatch observer, loaded on demand.
  metrics: ['base', 'contract', 'dispatch'],
  // The status page and the supervise metrics server (docs/decisions/0111): reads through management.
  web: ['base', 'contract', 'management'],
  cluster: [
    'base',
    'contract',
    'dispatch',
    'execution',
    'management',
    'metrics',
    'store/interfaces',
    'store/postgres',
    'store/sqlite',
    'web',
  ],
  cli: [
    'base',
    'cluster',
    'contract',
    'execution',
    'management',
    'metrics',
    'native',
    'process',
    'store/interfaces',
    'store/postgres',
    'store/sqlite',
    'web',
  ],
  root: ['base', 'native'],
};

function importedLayer(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const target = path.resolve(path.dirname(file), specifier);
  if (!target.startsWith(LIB + path.sep)) return 'outside lib';
  return layerOf(target.endsWith('.ts') ? target : `${target}.ts`);
}

/** Every edge layer → other layer that lib/ really has. */
function usedEdges(): { edges: Map<string, Set<string>>; violations: string[]; checked: number } {
  const edges = new Map<string, Set<string>>();
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
      if (target === null || target === layer) continue;
      checked++;
      if (!edges.has(layer)) edges.set(layer, new Set());
      edges.get(layer)!.add(target);
      if (!allowed.includes(target)) violations.push(`${path.relative(LIB, file)} imports ${target} (${specifier})`);
    }
  }
  return { edges, violations, checked };
}

test('every import under lib/ points down the layer order of design/architecture §2', (t) => {
  const { violations, checked } = usedEdges();
  t.deepEqual(violations, []);
  t.true(checked > 100, `checked ${checked} relative imports`);
});

test('the layer map is tight: every edge it allows is one the code uses', (t) => {
  const { edges } = usedEdges();
  const unused = Object.entries(ALLOWED).flatMap(([layer, targets]) =>
    targets.filter((target) => !edges.get(layer)?.has(target)).map((target) => `${layer} → ${target}`),
  );
  t.deepEqual(unused, [], 'remove the edges no file uses');
});

test('the rule is live: an upward import, a store importing the other, or dispatch importing a concrete store would be reported', (t) => {
  t.is(importedLayer(path.join(LIB, 'native', 'index.ts'), '../process/index'), 'process');
  t.false(ALLOWED.native?.includes('process'));
  t.is(importedLayer(path.join(LIB, 'store', 'sqlite', 'index.ts'), '../postgres/index'), 'store/postgres');
  t.false(ALLOWED['store/sqlite']?.includes('store/postgres'));
  t.is(importedLayer(path.join(LIB, 'dispatch', 'dispatcher.ts'), '../store/due-page'), 'store');
  t.false(ALLOWED.dispatch?.includes('store'));
  t.false(ALLOWED.management?.includes('dispatch'));
});

/** The lib/cluster files that import a module of the PostgreSQL store other than its public index. */
function clusterStoreInternals(): string[] {
  const postgres = path.join(LIB, 'store', 'postgres');
  return sources(path.join(LIB, 'cluster')).flatMap((file) =>
    importsOf(file)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => path.resolve(path.dirname(file), specifier))
      .filter((target) => target.startsWith(postgres + path.sep) && target !== path.join(postgres, 'index'))
      .map((target) => `${path.relative(LIB, file)} imports ${path.relative(LIB, target)}`),
  );
}

test('the cluster reaches the PostgreSQL store only through its public index: its SQL lives in the store (docs/decisions/0380)', (t) => {
  t.deepEqual(clusterStoreInternals(), []);
  t.true(
    sources(path.join(LIB, 'cluster')).some((file) => importsOf(file).includes('../store/postgres/index')),
    'the cluster still uses the store, through its index',
  );
});

/** The lib/ file a relative specifier names (x.ts or x/index.ts); null for a package or a non-.ts file. */
function importedFile(file: string, specifier: string, files: ReadonlySet<string>): string | null {
  if (!specifier.startsWith('.')) return null;
  const target = path.resolve(path.dirname(file), specifier);
  return [`${target}.ts`, path.join(target, 'index.ts'), target].find((candidate) => files.has(candidate)) ?? null;
}

/** The circles of an import graph: its strongly connected parts of two or more files, or a file importing itself. */
function circlesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const circles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) visit(next);
      if (stack.includes(next)) low.set(file, Math.min(low.get(file)!, low.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const part = stack.splice(stack.indexOf(file));
    if (part.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(part.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}

test('no circles: no file under lib/ imports itself back through others (type-only and on-demand imports count)', (t) => {
  const files = new Set(sources(LIB));
  const graph = new Map(
    [...files].map((file) => [
      file,
      importsOf(file)
        .map((specifier) => importedFile(file, specifier, files))
        .filter((target) => target !== null),
    ]),
  );
  t.true(graph.size > 100, `read ${graph.size} files`);
  t.deepEqual(
    circlesOf(graph).map((part) => part.map((file) => path.relative(LIB, file))),
    [],
  );
});

test('the circle rule is live: a two-file circle, a longer one and a self-import are reported, a chain is not', (t) => {
  const graph = new Map([
    ['a', ['b']],
    ['b', ['a', 'c']],
    ['c', ['d']],
    ['d', ['e']],
    ['e', ['c']],
    ['f', ['f']],
    ['g', ['a']],
  ]);
  t.deepEqual(circlesOf(graph), [['c', 'd', 'e'], ['a', 'b'], ['f']]);
  t.deepEqual(
    circlesOf(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', []],
      ]),
    ),
    [],
  );
});

function relativeImports(dir: string): Array<{ file: string; target: string }> {
  return sources(path.join(ROOT, dir)).flatMap((file) =>
    importsOf(file)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => ({
        file: path.relative(ROOT, file),
        target: path.relative(ROOT, path.resolve(path.dirname(file), specifier)),
      })),
  );
}

test('test helpers import lib/ and other helpers only, never a suite', (t) => {
  const wrong = relativeImports(path.join('test', 'helpers')).filter(
    ({ target }) => !/^(lib|test\/helpers)\//.test(target) || /\.test$|-suite$/.test(target),
  );
  t.deepEqual(wrong, []);
});

test('benchmarks import lib/, their own bench/lib and the shared harness in test/helpers, never a test or suite', (t) => {
  const wrong = relativeImports('bench').filter(
    ({ target }) => !/^(lib|bench|test\/helpers)\//.test(target) || /\.test$|-suite$/.test(target),
  );
  t.deepEqual(wrong, []);
});

test('lib/metrics (prom-client) is only ever imported on demand: no static import of it outside its folder (docs/decisions/0110)', (t) => {
  const staticImports: string[] = [];
  let dynamic = 0;
  for (const file of sources(LIB)) {
    if (layerOf(file) === 'metrics') continue;
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(
      /\b(?:import|export)(\s+type)?\s[^;]*?\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g,
    )) {
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

/** A literal that opens with a statement's keyword (and more text), or is a bare transaction control word; DDL names its object. */
const SCHEMA_OBJECT = String.raw`(?:TABLE|INDEX|UNIQUE|ROLE|SCHEMA|FUNCTION|TRIGGER|VIEW|TYPE|SEQUENCE|OR\s+REPLACE)`;
const STATEMENT_START = new RegExp(
  String.raw`^\s*;?\s*(?:(?:SELECT|INSERT|UPDATE|DELETE|WITH|GRANT|REVOKE|LISTEN|UNLISTEN|NOTIFY|PRAGMA|SAVEPOINT|EXPLAIN|VACUUM|TRUNCATE|SET\s+(?:LOCAL|SESSION))\s+\S|(?:CREATE|ALTER|DROP)\s+${SCHEMA_OBJECT}|(?:BEGIN|COMMIT|ROLLBACK)\b)`,
);
/** A clause no prose or identifier has: it marks SQL text wherever in the literal it stands. */
const STATEMENT_CLAUSE =
  /\b(?:INSERT\s+INTO\s|DELETE\s+FROM\s|UPDATE\s+\w+\s+SET\s|SELECT\s[\s\S]*?\sFROM\s|FOR\s+(?:NO\s+KEY\s+)?UPDATE\b|ON\s+CONFLICT\b|RETURNING\s)/;

/** The text of a string or template literal, each substitution standing as `?`; null for other nodes. */
function literalText(node: ts.Node): string | null {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node))
    return node.head.text + node.templateSpans.map((span) => `?${span.literal.text}`).join('');
  return null;
}

/**
 * The SQL statement text of one source (comments are not read: only literals of the syntax tree): each
 * literal that reads as a statement, and each literal handed to better-sqlite3's pragma().
 */
function sqlTextIn(fileName: string, source: string): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    const text = literalText(node);
    if (text !== null && (STATEMENT_START.test(text) || STATEMENT_CLAUSE.test(text))) found.push(text);
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      node.expression.name.text === 'pragma' &&
      node.arguments[0] !== undefined &&
      literalText(node.arguments[0]) !== null
    )
      found.push(`pragma(${literalText(node.arguments[0])})`);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true));
  return found;
}

/** Every .ts file under `lib` outside the statements files that holds SQL text, with its first statement. */
function sqlOutsideStatements(lib: string): string[] {
  return sources(lib)
    .filter((file) => !file.endsWith('-statements.ts'))
    .flatMap((file) => {
      const found = sqlTextIn(file, readFileSync(file, 'utf8'));
      return found.length === 0
        ? []
        : [`${path.relative(lib, file)}: ${found.length} (${found[0]!.replace(/\s+/g, ' ').slice(0, 60)})`];
    });
}

test('every SQL statement lives in a *-statements.ts of lib/store: no other lib/ file holds SQL text (docs/decisions/0410)', (t) => {
  t.deepEqual(sqlOutsideStatements(LIB), []);
  const homes = sources(LIB)
    .filter((file) => file.endsWith('-statements.ts'))
    .map((file) => path.relative(LIB, file));
  t.deepEqual(
    homes.filter((file) => !/^store\/((sqlite|postgres)\/)?[a-z]+(-[a-z]+)*-statements\.ts$/.test(file)),
    [],
    'a statements file is lib/store/<concept>-statements.ts or lib/store/<dialect>/<concept>-statements.ts',
  );
  t.true(homes.length >= 20, `${homes.length} statements files`);
});

test('the SQL rule is live: statement text in a string or template is found, comments, prose and privilege names are not', (t) => {
  const found = (source: string): string[] => sqlTextIn('probe.ts', source);
  t.deepEqual(found("const a = 'SELECT 1 AS found FROM attempts WHERE id = ?';"), [
    'SELECT 1 AS found FROM attempts WHERE id = ?',
  ]);
  t.is(found('const b = `UPDATE runs SET status = ${s} WHERE id = $1`;').length, 1);
  t.is(found('const c = `${COLUMNS} FROM runs r WHERE r.id = $1 FOR NO KEY UPDATE`;').length, 1);
  t.is(found("const d = 'LISTEN pidfence_cancel';").length, 1);
  t.is(found("await control('COMMIT');").length, 1);
  t.deepEqual(found("database.pragma('journal_mode = WAL');"), ['pragma(journal_mode = WAL)']);
  t.deepEqual(found('// SELECT x FROM runs WHERE id = 1\n/* INSERT INTO runs VALUES (1) */ const e = 1;'), []);
  t.deepEqual(found("const f = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];"), []);
  t.deepEqual(found('const g = `the role ${name} does not exist; create it first (CREATE ROLE ${name} LOGIN)`;'), []);
  t.deepEqual(found("throw new Error('the store is not ready: run migrate, then select a runner');"), []);
  t.deepEqual(found('const h = [`CREATE on schema ${schema}`];'), []);
  t.is(found('const i = `CREATE TABLE IF NOT EXISTS ${TABLE} (version integer)`;').length, 1);
});
