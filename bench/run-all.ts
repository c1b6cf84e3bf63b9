// `npm run bench`: runs every benchmark and regenerates the generated part of docs/benchmarks.md:
// a summary of every PASS/MISS target line at the top, and each benchmark's output (which starts
// with its machine, date and command header) in its own marked block. The hand-written method
// notes outside the markers stay as they are. `-- --only edge,signal` runs a subset and keeps the
// other blocks from their last run.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

interface Benchmark {
  readonly key: string;
  readonly command: readonly string[];
}

const root = path.resolve(__dirname, '..', '..');
const doc = path.join(root, 'docs', 'benchmarks.md');
const BENCHMARKS: readonly Benchmark[] = [
  { key: 'edge', command: ['node', 'dist/bench/edge-footprint.js'] },
  { key: 'signal', command: ['node', 'dist/bench/signal-latency.js'] },
  { key: 'safety', command: ['node', 'dist/bench/stop-safety.js'] },
  { key: 'dispatch', command: ['node', 'dist/test/helpers/with-postgres.js', 'node', 'dist/bench/dispatch-throughput.js'] },
  { key: 'supervisor', command: ['nice', '-n', '10', 'node', 'dist/bench/supervisor-scale.js'] },
];

const start = (key: string): string => `<!-- generated:${key}:start -->`;
const end = (key: string): string => `<!-- generated:${key}:end -->`;

function blockOf(text: string, key: string): string | undefined {
  const from = text.indexOf(start(key));
  const to = text.indexOf(end(key));
  return from >= 0 && to > from ? text.slice(from + start(key).length, to) : undefined;
}

function withBlock(text: string, key: string, body: string, placeAfter: string): string {
  const block = `${start(key)}\n${body.trim()}\n${end(key)}`;
  const from = text.indexOf(start(key));
  const to = text.indexOf(end(key));
  if (from >= 0 && to > from) return text.slice(0, from) + block + text.slice(to + end(key).length);
  const at = text.indexOf(placeAfter);
  const cut = at >= 0 ? text.indexOf('\n', at) + 1 : text.length;
  return `${text.slice(0, cut)}\n${block}\n${text.slice(cut)}`;
}

function run(benchmark: Benchmark): string {
  process.stderr.write(`== ${benchmark.key}: ${benchmark.command.join(' ')}\n`);
  const [command, ...args] = benchmark.command as [string, ...string[]];
  const result = spawnSync(command, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 });
  const status = result.status === 0 ? '' : `\n\n(exit ${result.status ?? result.signal}: this run is incomplete)`;
  return `Command: \`npm run bench\` → \`${benchmark.command.join(' ')}\`\n\n${result.stdout.trim()}${status}`;
}

/** Every line a benchmark printed with PASS or MISS in it, in one table. */
function summary(text: string): string {
  const rows: string[] = [];
  for (const benchmark of BENCHMARKS) {
    const body = blockOf(text, benchmark.key) ?? '';
    for (const line of body.split('\n')) {
      const verdict = /\b(PASS|MISS)\b/.exec(line)?.[1];
      if (verdict) rows.push(`| ${benchmark.key} | ${verdict} | ${line.replace(/^[-\s]*/, '').replace(/\|/g, '\\|')} |`);
    }
  }
  return [
    `Summary of the generated runs below (made ${new Date().toISOString()} by \`npm run bench\`):`,
    '',
    '| benchmark | result | target line as printed |',
    '| --- | --- | --- |',
    ...(rows.length > 0 ? rows : ['| — | — | no run printed a target line |']),
  ].join('\n');
}

function main(): void {
  const onlyIndex = process.argv.indexOf('--only');
  const only = onlyIndex >= 0 ? new Set((process.argv[onlyIndex + 1] ?? '').split(',')) : undefined;
  let text = fs.readFileSync(doc, 'utf8');
  if (!text.includes('## Generated runs')) text = `${text.trimEnd()}\n\n## Generated runs\n`;
  for (const benchmark of BENCHMARKS) {
    if (only && !only.has(benchmark.key)) continue;
    text = withBlock(text, benchmark.key, `### Latest generated run: ${benchmark.key}\n\n${run(benchmark)}`, '## Generated runs');
  }
  text = withBlock(text, 'summary', summary(text), '# Benchmarks');
  fs.writeFileSync(doc, text);
  process.stderr.write(`docs/benchmarks.md regenerated\n`);
}

main();
