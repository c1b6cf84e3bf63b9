// Side-by-side tables and target checks for bench/ scripts: name | median | p99 | ratio vs a
// baseline row of the same table. Reused by every benchmark so their outputs read alike.

export interface Row {
  readonly name: string;
  /** Name of another row of the same table; the ratio column is median / its median. */
  readonly baseline?: string;
  /** Nanoseconds. */
  readonly median: number;
  readonly p99: number;
  /** How many samples the figures summarise, shown so a thin row is visible as such. */
  readonly samples?: number;
}

export interface Target {
  readonly name: string;
  /** The measured ratio. */
  readonly ratio: number;
  readonly op: '<=' | '>=';
  readonly limit: number;
  /** One line on what the ratio is made of, e.g. "JS pidfs / C pidfs floor". */
  readonly detail: string;
}

const nsFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function formatNs(ns: number): string {
  return Number.isFinite(ns) ? `${nsFormat.format(ns)} ns` : 'n/a';
}

export function formatRatio(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : 'n/a';
}

function findRow(rows: readonly Row[], name: string): Row {
  const row = rows.find((candidate) => candidate.name === name);
  // A baseline naming no row is a bug in the benchmark script, not a measurement result.
  if (!row) throw new Error(`bench table: no row named "${name}"`);
  return row;
}

/** median(a) / median(b), looked up by row name. */
export function ratioOf(rows: readonly Row[], name: string, baseline: string): number {
  return findRow(rows, name).median / findRow(rows, baseline).median;
}

/** The table as Markdown, so the same text goes to the terminal and into docs/. */
export function renderTable(rows: readonly Row[]): string {
  const header = ['row', 'median', 'p99', 'samples', 'ratio', 'vs baseline'];
  const body = rows.map((row) => [
    row.name,
    formatNs(row.median),
    formatNs(row.p99),
    row.samples === undefined ? '' : String(row.samples),
    row.baseline === undefined ? '' : formatRatio(ratioOf(rows, row.name, row.baseline)),
    row.baseline ?? '',
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => (cells[column] ?? '').length)),
  );
  // Numbers right-aligned, text left-aligned, as a reader scans them.
  const numeric = [false, true, true, true, true, false];
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((cell, column) => (numeric[column] ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((width, column) => (numeric[column] ? `${'-'.repeat(Math.max(1, width - 1))}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

export function targetMet(target: Target): boolean {
  return target.op === '<=' ? target.ratio <= target.limit : target.ratio >= target.limit;
}

/** PASS/MISS lines; a miss is reported, never turned into an exit code (a benchmark is not a test). */
export function renderTargets(targets: readonly Target[]): string {
  return targets
    .map(
      (target) =>
        `- ${targetMet(target) ? 'PASS' : 'MISS'} ${target.name}: ${formatRatio(target.ratio)} (target ${target.op} ${target.limit}x; ${target.detail})`,
    )
    .join('\n');
}

/**
 * A free-form side-by-side table (e.g. scenario × contender) as Markdown, aligned like
 * renderTable: `numeric[i]` right-aligns column i. Cells are preformatted text.
 */
export function renderGrid(
  header: readonly string[],
  body: ReadonlyArray<readonly string[]>,
  numeric: readonly boolean[],
): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => (cells[column] ?? '').length)),
  );
  const line = (cells: readonly string[]): string =>
    `| ${header.map((_, column) => (numeric[column] ? (cells[column] ?? '').padStart(widths[column] ?? 0) : (cells[column] ?? '').padEnd(widths[column] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((width, column) => (numeric[column] ? `${'-'.repeat(Math.max(1, width - 1))}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(header), rule, ...body.map(line)].join('\n');
}
