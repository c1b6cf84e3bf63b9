// `npm run bench`: runs every benchmark and regenerates the generated part of docs/benchmarks.md: a
// summary at the top (each benchmark's run, and every target line it printed with PASS or MISS), and
// each benchmark's output, which starts with its machine, date and command, in its own marked block.
// The hand-written notes outside the markers stay as they are. A benchmark that fails or hangs is
// reported as ERROR in its block and in the summary; the others still run.
// `npm run bench -- --only edge,cluster` runs a subset and keeps the other blocks from their last run.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { signalVerified, type ProcessIdentity } from '../lib/native/index';
import { spawnGroupLeader } from '../lib/process/index';

interface Benchmark {
  readonly key: string;
  readonly command: readonly string[];
}

const root = path.resolve(__dirname, '..', '..');
const doc = path.join(root, 'docs', 'benchmarks.md');
const WITH_POSTGRES = ['node', 'dist/test/helpers/with-postgres.js'];
const BENCHMARKS: readonly Benchmark[] = [
  { key: 'edge', command: ['node', 'dist/bench/edge-footprint.js'] },
  { key: 'launcher', command: ['node', 'dist/bench/launcher-footprint.js'] },
  { key: 'wake', command: ['node', 'dist/bench/local-stop.js'] },
  { key: 'joblog', command: ['node', 'dist/bench/job-log.js'] },
  { key: 'signal', command: ['node', 'dist/bench/signal-latency.js'] },
  { key: 'safety', command: ['node', 'dist/bench/stop-safety.js'] },
  { key: 'stop-tree', command: ['node', 'dist/bench/stop-tree.js'] },
  { key: 'dispatch', command: [...WITH_POSTGRES, 'node', 'dist/bench/dispatch-throughput.js'] },
  { key: 'round-trips', command: [...WITH_POSTGRES, 'node', 'dist/bench/round-trips.js'] },
  { key: 'supervisor', command: ['nice', '-n', '10', 'node', 'dist/bench/supervisor-scale.js'] },
  { key: 'burst', command: [...WITH_POSTGRES, 'node', 'dist/bench/burst-drain.js'] },
  { key: 'cluster', command: [...WITH_POSTGRES, 'node', 'dist/bench/cluster-stop.js'] },
  { key: 'admission', command: [...WITH_POSTGRES, 'node', 'dist/bench/worker-admission.js'] },
  { key: 'durability', command: ['nice', '-n', '10', 'node', 'dist/bench/durability.js'] },
  { key: 'single-row', command: [...WITH_POSTGRES, 'node', 'dist/bench/single-row-functions.js'] },
  { key: 'fleet', command: [...WITH_POSTGRES, 'node', 'dist/bench/fleet.js'] },
  { key: 'project-cancel', command: [...WITH_POSTGRES, 'node', 'dist/bench/project-cancel.js'] },
  { key: 'page-stops', command: ['node', 'dist/bench/page-stops.js'] },
];
/** A benchmark still running after this long is stopped and reported as ERROR. */
const TIMEOUT_MS = Number(process.env.PIDFENCE_BENCH_TIMEOUT_MS ?? 90 * 60_000);
const STDERR_TAIL_LINES = 12;

const start = (key: string): string => `<!-- generated:${key}:start -->`;
const end = (key: string): string => `<!-- generated:${key}:end -->`;
const RUN_LINE = /^Run: (ok|ERROR)\b(.*)$/m;

function blockOf(text: string, key: string): string | undefined {
  const from = text.indexOf(start(key));
  const to = text.indexOf(end(key));
  return from >= 0 && to > from ? text.slice(from + start(key).length, to) : undefined;
}

/** Replaces the block of `key`; a new block goes after the line `placeAfter`, or at the end of the file. */
function withBlock(text: string, key: string, body: string, placeAfter?: string): string {
  const block = `${start(key)}\n${body.trim()}\n${end(key)}`;
  const from = text.indexOf(start(key));
  const to = text.indexOf(end(key));
  if (from >= 0 && to > from) return text.slice(0, from) + block + text.slice(to + end(key).length);
  const at = placeAfter === undefined ? -1 : text.indexOf(placeAfter);
  if (at < 0) return `${text.trimEnd()}\n\n${block}\n`;
  const cut = text.indexOf('\n', at) + 1;
  return `${text.slice(0, cut)}\n${block}\n${text.slice(cut)}`;
}

interface Outcome {
  readonly stdout: string;
  readonly stderrTail: string[];
  /** null: exited 0. */
  readonly failure: string | null;
  readonly seconds: number;
}

/** The group of the benchmark running now: stopped through its verified leader on timeout or Ctrl-C. */
let current: ProcessIdentity | null = null;

function stopCurrent(): void {
  if (current !== null) signalVerified(current, 'SIGTERM', { group: true });
}

/** Runs one benchmark as its own process group: stdout kept, stderr shown as it comes and its tail kept; never throws. */
function run(benchmark: Benchmark): Promise<Outcome> {
  process.stderr.write(`== ${benchmark.key}: ${benchmark.command.join(' ')}\n`);
  const started = Date.now();
  const [command, ...args] = benchmark.command as [string, ...string[]];
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const { child, identity } = spawnGroupLeader(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    current = identity;
    const timer = setTimeout(() => {
      timedOut = true;
      stopCurrent();
    }, TIMEOUT_MS);
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      process.stderr.write(chunk);
      stderr = (stderr + chunk).slice(-16_384);
    });
    const finish = (failure: string | null): void => {
      clearTimeout(timer);
      current = null;
      const stderrTail = stderr
        .split('\n')
        .map((line) => line.trimEnd())
        .filter((line) => line !== '')
        .slice(-STDERR_TAIL_LINES);
      resolve({ stdout, stderrTail, failure, seconds: (Date.now() - started) / 1000 });
    };
    child.on('error', (error) => finish(`could not start (${error.message})`));
    child.on('close', (code, signal) => {
      if (timedOut) finish(`stopped after the ${TIMEOUT_MS / 60_000} min timeout`);
      else finish(code === 0 ? null : `exit ${code ?? signal}`);
    });
  });
}

function blockBody(benchmark: Benchmark, outcome: Outcome): string {
  const status =
    outcome.failure === null
      ? `Run: ok in ${outcome.seconds.toFixed(0)} s`
      : `Run: ERROR (${outcome.failure}) after ${outcome.seconds.toFixed(0)} s: the output below is incomplete`;
  const tail =
    outcome.failure === null || outcome.stderrTail.length === 0
      ? ''
      : `\n\nLast lines on stderr:\n\n\`\`\`\n${outcome.stderrTail.join('\n')}\n\`\`\``;
  return `### Latest generated run: ${benchmark.key}\n\nCommand: \`npm run bench\` → \`${benchmark.command.join(' ')}\`\n\n${status}\n\n${outcome.stdout.trim()}${tail}`;
}

/** One row per benchmark run (ok, ERROR, or not run yet), and one per line it printed with PASS or MISS. */
function summary(text: string): string {
  const rows: string[] = [];
  for (const benchmark of BENCHMARKS) {
    const body = blockOf(text, benchmark.key);
    if (body === undefined) {
      rows.push(`| ${benchmark.key} | not run yet | — | \`npm run bench -- --only ${benchmark.key}\` |`);
      continue;
    }
    const [, state = 'ok', detail = ''] = RUN_LINE.exec(body) ?? [];
    const date = /^- date: (\S+)/m.exec(body)?.[1] ?? /^date: (\S+)/m.exec(body)?.[1] ?? '—';
    const targets = body.split('\n').filter((line) => /\b(PASS|MISS)\b/.test(line));
    if (state === 'ERROR') rows.push(`| ${benchmark.key} | ${date} | ERROR | ${detail.trim().replace(/\|/g, '\\|')} |`);
    else if (targets.length === 0) rows.push(`| ${benchmark.key} | ${date} | — | measured; no target line |`);
    for (const line of targets) {
      const verdict = /\bMISS\b/.test(line) ? 'MISS' : 'PASS';
      rows.push(`| ${benchmark.key} | ${date} | ${verdict} | ${line.replace(/^[-\s]*/, '').replace(/\|/g, '\\|')} |`);
    }
  }
  return [
    `Summary of the generated runs below (regenerated ${new Date().toISOString()} by \`npm run bench\`; a row of`,
    'a table with several targets is MISS when any of them is):',
    '',
    '| benchmark | run date | result | target line as printed |',
    '| --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** `--only a,b` or `--only=a,b`; every name must be a benchmark's. */
function selected(argv: readonly string[]): Set<string> | undefined {
  const at = argv.findIndex((arg) => arg === '--only' || arg.startsWith('--only='));
  if (at < 0) return undefined;
  const value = argv[at]?.startsWith('--only=') ? argv[at]?.slice('--only='.length) : argv[at + 1];
  const names = (value ?? '').split(',').filter((name) => name !== '');
  const unknown = names.filter((name) => !BENCHMARKS.some((benchmark) => benchmark.key === name));
  if (names.length === 0 || unknown.length > 0) {
    process.stderr.write(
      `bench: --only takes benchmark names separated by commas: ${BENCHMARKS.map((benchmark) => benchmark.key).join(', ')}${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}\n`,
    );
    process.exit(2);
  }
  return new Set(names);
}

async function main(): Promise<void> {
  const only = selected(process.argv.slice(2));
  // Each benchmark leads its own group, out of reach of the terminal's Ctrl-C: pass it on.
  process.once('SIGINT', () => {
    stopCurrent();
    process.exit(130);
  });
  let text = fs.readFileSync(doc, 'utf8');
  if (!text.includes('## Generated runs')) text = `${text.trimEnd()}\n\n## Generated runs\n`;
  const failed: string[] = [];
  for (const benchmark of BENCHMARKS) {
    if (only !== undefined && !only.has(benchmark.key)) continue;
    const outcome = await run(benchmark);
    if (outcome.failure !== null) failed.push(benchmark.key);
    text = withBlock(text, benchmark.key, blockBody(benchmark, outcome));
    // Written after every benchmark, so a long run that is interrupted keeps what it measured.
    text = withBlock(text, 'summary', summary(text), '# Benchmarks');
    fs.writeFileSync(doc, text);
  }
  process.stderr.write(
    `docs/benchmarks.md regenerated${failed.length > 0 ? `; ERROR in: ${failed.join(', ')}` : ''}\n`,
  );
  // A MISS is a measurement, not a failure; a benchmark that could not finish is.
  if (failed.length > 0) process.exitCode = 1;
}

void main();
