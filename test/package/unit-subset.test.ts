// `npm run test:unit` (docs/decisions/0232) keeps to its promise: each test file it leaves out exists
// and is left out for a reason it names, and no file it runs reaches a PostgreSQL fixture, the
// installer of system packages, or code that needs root. The proof in full is running it as an
// unprivileged user with no server (decision 0232 says how); this test catches a misfiled test early.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import test from 'ava';

import { importsOf, sources } from '../helpers/imports';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const TEST = path.join(ROOT, 'test');

interface UnitConfig {
  readonly NEEDS_POSTGRES: readonly string[];
  readonly NEEDS_ROOT: readonly string[];
  readonly NEEDS_SYSTEM: readonly string[];
  readonly default: {
    readonly files: readonly string[];
    readonly environmentVariables: Readonly<Record<string, string>>;
  };
}

/** Fixtures that need a PostgreSQL server, and the installer of system packages. */
const NEEDS_OUTSIDE = [
  'helpers/pg-store',
  'helpers/postgres',
  'helpers/pg-cluster',
  'helpers/pg-schema',
  'helpers/pg-crash-point',
  'helpers/pg-test-clock',
  'helpers/with-postgres',
  'helpers/test-tools',
  'helpers/certificates',
];
/** Picks its PostgreSQL factory away under PIDFENCE_TEST_STORES=sqlite, so it is not followed. */
const SELECTS_STORES = 'helpers/stores';
/** What code that needs root says: a child under another uid, a file given away, the PID counter. */
const ROOT_ONLY =
  /\brequireRoot\(|\bdisownStore\(|\buid: \d|ns_last_pid|getuid\?\.\(\) === 0|execFileSync\('mount'|'unshare'/;
/** Define those helpers, or (this file) spell the pattern, without running them. */
const DEFINES_ROOT_HELPERS = ['cli/pidfence-process', 'package/unit-subset.test'];

/** A real import(): TypeScript would turn `import()` into require(), which cannot load an ES module here. */
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;
const config = (): Promise<UnitConfig> =>
  importModule(pathToFileURL(path.join(ROOT, 'ava.unit.config.mjs')).href) as Promise<UnitConfig>;

/** `test/<name>.ts` of a file, e.g. `cli/main.test`. */
const nameOf = (file: string): string => path.relative(TEST, file).replace(/\.ts$/, '');

/** The test-local modules `file` reaches, itself included, not following the store selector. */
function reached(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  if (nameOf(file) === SELECTS_STORES) return seen;
  for (const specifier of importsOf(file)) {
    if (!specifier.startsWith('.')) continue;
    const target = `${path.resolve(path.dirname(file), specifier)}.ts`;
    if (target.startsWith(TEST + path.sep) && existsSync(target)) reached(target, seen);
  }
  return seen;
}

test('every file test:unit leaves out is a test file, listed once', async (t) => {
  const { NEEDS_POSTGRES, NEEDS_ROOT, NEEDS_SYSTEM } = await config();
  const listed = [...NEEDS_POSTGRES, ...NEEDS_ROOT, ...NEEDS_SYSTEM];
  t.deepEqual(
    listed.filter((name) => !existsSync(path.join(TEST, `${name}.test.ts`))),
    [],
  );
  t.is(new Set(listed).size, listed.length);
});

test('no file test:unit runs reaches a PostgreSQL fixture, the package installer or root-only code', async (t) => {
  const { NEEDS_POSTGRES, NEEDS_ROOT, NEEDS_SYSTEM, default: unit } = await config();
  t.deepEqual(unit.environmentVariables, { PIDFENCE_TEST_STORES: 'sqlite' });
  const left = new Set([...NEEDS_POSTGRES, ...NEEDS_ROOT, ...NEEDS_SYSTEM].map((name) => `${name}.test`));
  const unitFiles = sources(TEST).filter((file) => file.endsWith('.test.ts') && !left.has(nameOf(file)));
  t.true(unitFiles.length >= 30, `${unitFiles.length} files`);
  const problems = unitFiles.flatMap((file) =>
    [...reached(file)].flatMap((module) => {
      const name = nameOf(module);
      if (NEEDS_OUTSIDE.includes(name)) return [`${nameOf(file)} reaches ${name}`];
      const rootOnly = ROOT_ONLY.test(readFileSync(module, 'utf8')) && !DEFINES_ROOT_HELPERS.includes(name);
      return rootOnly ? [`${nameOf(file)} reaches root-only code in ${name}`] : [];
    }),
  );
  t.deepEqual(problems, []);
});

test('the rule is live: a PostgreSQL test and a root test would be reported', (t) => {
  t.true(
    [...reached(path.join(TEST, 'store', 'postgres.test.ts'))].some((module) => NEEDS_OUTSIDE.includes(nameOf(module))),
  );
  t.true(ROOT_ONLY.test(readFileSync(path.join(TEST, 'cli', 'principal.test.ts'), 'utf8')));
  t.false(
    [...reached(path.join(TEST, 'dispatch', 'supervisor.test.ts'))].some((module) =>
      NEEDS_OUTSIDE.includes(nameOf(module)),
    ),
  );
});
