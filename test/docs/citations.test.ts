// Design citations resolve (docs/design/README.md): every `design/<page> §<id>` in lib/ and docs/
// names a page in docs/design/ and a heading on it; the old forms that could not be opened from the
// repository (numbered seed records, the shared brief's sections) and Chinese text are gone; and the
// gate titles that docs/gates.md quotes still exist in test/, since gate titles are not citations.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const DESIGN = path.join(ROOT, 'docs', 'design');

/** Every file under `dir` (relative to the repository root), recursively. */
function filesUnder(dir: string): string[] {
  const absolute = path.join(ROOT, dir);
  if (!existsSync(absolute)) return [];
  return readdirSync(absolute, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) =>
      path.relative(ROOT, path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name)),
    );
}

interface Line {
  readonly where: string;
  readonly text: string;
}

function linesOf(files: readonly string[]): Line[] {
  return files.flatMap((file) =>
    readFileSync(path.join(ROOT, file), 'utf8')
      .split('\n')
      .map((text, index) => ({ where: `${file}:${index + 1}`, text })),
  );
}

/** A heading's id is its first word without a leading §: "## design/dispatch §2.3 Sending…" → "2.3", "## D3 …" → "D3". */
function headingIds(page: string): Set<string> | undefined {
  const file = path.join(DESIGN, `${page}.md`);
  if (!existsSync(file)) return undefined;
  const ids = new Set<string>();
  for (const match of readFileSync(file, 'utf8').matchAll(/^#{2,6}\s+§?(\S+)/gm)) ids.add(match[1] ?? '');
  return ids;
}

const PAGE = /design\/([a-z][a-z-]*)/g;
const SECTION = /§(D?\d+(?:\.\d+)*|[A-Z][A-Za-z]*(?:-[a-z]+)*)(?:-(D?\d+(?:\.\d+)*))?/g;

/** What is wrong with the citations on one line, each as "file:line: reason". */
function unresolved(line: Line, sectionNeedsPage: boolean): string[] {
  const problems: string[] = [];
  const pages = [...line.text.matchAll(PAGE)].map((m) => ({ at: m.index, page: m[1] ?? '' }));
  for (const { page } of pages) {
    if (!headingIds(page)) problems.push(`${line.where}: no page docs/design/${page}.md`);
  }
  for (const section of line.text.matchAll(SECTION)) {
    const owner = pages.filter((p) => p.at < section.index).at(-1);
    if (!owner) {
      if (sectionNeedsPage) problems.push(`${line.where}: ${section[0]} names no design/<page> before it on its line`);
      continue;
    }
    const ids = headingIds(owner.page);
    if (!ids) continue;
    for (const id of [section[1], section[2]]) {
      if (id !== undefined && !ids.has(id)) problems.push(`${line.where}: design/${owner.page} has no heading §${id}`);
    }
  }
  return problems;
}

const LIB = filesUnder('lib');
/** Pictures (the README's screenshot) are not text: nothing in them can cite. */
const DOCS = [...filesUnder('docs').filter((file) => !/\.(png|jpe?g|gif)$/.test(file)), 'README.md'];

test('every design citation in lib/ names an existing page and heading', (t) => {
  t.true(LIB.length > 50, 'lib/ was found');
  const problems = linesOf(LIB).flatMap((line) => unresolved(line, true));
  t.deepEqual(problems, []);
  t.true(
    linesOf(LIB).some((line) => /design\/dispatch §2\.3/.test(line.text)),
    'lib/ cites the design pages at all',
  );
});

test('every design citation in docs/ and README names an existing page and heading', (t) => {
  t.deepEqual(
    linesOf(DOCS).flatMap((line) => unresolved(line, false)),
    [],
  );
});

test('the citation check itself: a missing heading, a missing page and a pageless section are caught', (t) => {
  const line = (text: string): Line => ({ where: 'x:1', text });
  t.deepEqual(unresolved(line('(design/dispatch §2.3-2.5, §6 gate 1)'), true), []);
  t.deepEqual(unresolved(line('design/postgres §D7-D8, design/execution §Verification'), true), []);
  t.deepEqual(unresolved(line('design/dispatch §9.9'), true), ['x:1: design/dispatch has no heading §9.9']);
  t.deepEqual(unresolved(line('design/postgres §D3-D11'), true), ['x:1: design/postgres has no heading §D11']);
  t.deepEqual(unresolved(line('design/nowhere §1'), true), ['x:1: no page docs/design/nowhere.md']);
  t.deepEqual(unresolved(line('see §2.3'), true), ['x:1: §2.3 names no design/<page> before it on its line']);
});

const OLD_FORMS: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bADR-\d{4}\b/, 'a numbered seed record (cite design/<page> §<id>)'],
  [/\bDESIGN(?:\.md)? §/, "the shared brief's section (cite design/<page> §<id>)"],
  [/\b00[0-3]_[0-9a-f]{16}\b/, 'a seed file name (cite design/<page>)'],
  [/[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]/, 'Chinese text (headings and names are in English)'],
];

test('no old-form citation, seed file name or Chinese text is left in lib/, docs/ or README', (t) => {
  const problems = linesOf([...LIB, ...DOCS]).flatMap((line) =>
    OLD_FORMS.filter(([pattern]) => pattern.test(line.text)).map(([, what]) => `${line.where}: ${what}`),
  );
  t.deepEqual(problems, []);
});

test('the gate titles docs/gates.md quotes still exist in test/ (gate titles are not citations)', (t) => {
  const tests = filesUnder('test')
    .filter((file) => file.endsWith('.ts'))
    .map((file) => readFileSync(path.join(ROOT, file), 'utf8'))
    .join('\n');
  const quoted = [
    ...readFileSync(path.join(ROOT, 'docs', 'gates.md'), 'utf8').matchAll(
      /"((?:pg |cluster |lifecycle )?gate [^"…]*)/g,
    ),
  ]
    .map((m) => (m[1] ?? '').trim())
    .filter((title) => /^(?:pg |cluster |lifecycle )?gate \S+:/.test(title) && !/: $/.test(title) && !/:$/.test(title));
  t.true(quoted.length > 20, 'docs/gates.md quotes gate titles');
  t.deepEqual(
    quoted.filter((title) => !tests.includes(title)),
    [],
  );
});
