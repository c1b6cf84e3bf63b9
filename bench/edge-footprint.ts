// Edge footprint (issue 19 §4, partial): the modules each edge/standalone entry loads in a fresh
// process, idle RSS of a process holding an open pidfence SQLite store with the dispatch layer
// loaded against a bare `node` holding a better-sqlite3 database, and the installed size of the
// package's production dependencies. Not yet measured here: a real idle `supervise` holding 1,000
// runs, its wake-ups per minute, and WAL bytes per cancellation (see docs/benchmarks.md).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { machineHeader } from './lib/machine';

const root = path.resolve(__dirname, '..', '..');
const IDLE_MS = 2_000;
const RSS_TARGET = 1.2;

function nodeEval(script: string): string {
  const result = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) throw new Error(`node -e failed: ${result.stderr}`);
  return result.stdout;
}

function modulesLoaded(entry: string): { files: number; packages: string[] } {
  const files = JSON.parse(nodeEval(`require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`)) as string[];
  const packages = new Set(files.map((file) => /node_modules\/((@[^/]+\/)?[^/]+)/.exec(file)?.[1]).filter((name): name is string => name !== undefined));
  return { files: files.length, packages: [...packages].sort() };
}

/** RSS in kB after the process has sat idle for IDLE_MS with `setup` done. */
function idleRss(setup: string): number {
  const script = `${setup}; setTimeout(() => { const line = require('fs').readFileSync('/proc/self/status', 'utf8').split('\\n').find((l) => l.startsWith('VmRSS:')); process.stdout.write(line.replace(/\\D+/g, '')); }, ${IDLE_MS});`;
  return Number(nodeEval(script));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function duKb(dir: string): number {
  const result = spawnSync('du', ['-sk', dir], { encoding: 'utf8' });
  return Number(result.stdout.split('\t')[0]);
}

function productionDependencyDirs(): string[] {
  const result = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: root, encoding: 'utf8' });
  return result.stdout.split('\n').filter((dir) => dir !== '' && dir !== root && dir.includes('node_modules'));
}

function main(): void {
  const lines: string[] = ['## Edge footprint', '', machineHeader([`idle period ${IDLE_MS} ms, 3 processes per row`]), ''];
  lines.push('| entry | modules loaded | packages from node_modules |', '| --- | ---: | --- |');
  for (const entry of ['pidfence', 'pidfence/native', 'pidfence/process', 'pidfence/contract', 'pidfence/sqlite', 'pidfence/dispatch']) {
    const loaded = modulesLoaded(entry);
    lines.push(`| \`${entry}\` | ${loaded.files} | ${loaded.packages.join(', ') || '—'} |`);
  }
  const dbDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-edge-'));
  try {
    const bare = median([0, 1, 2].map((i) => idleRss(`const db = new (require('better-sqlite3'))(${JSON.stringify(path.join(dbDir, `bare${i}.db`))}); db.pragma('journal_mode = WAL')`)));
    const store = median([0, 1, 2].map((i) => idleRss(`require('pidfence/dispatch'); const s = require('pidfence/sqlite').openSqliteStore(${JSON.stringify(path.join(dbDir, `store${i}.db`))})`)));
    const ratio = store / bare;
    lines.push('', '| process, idle | RSS | ratio |', '| --- | ---: | ---: |');
    lines.push(`| bare node + better-sqlite3 database (WAL) | ${bare} kB | 1.00x |`);
    lines.push(`| pidfence/sqlite store open + pidfence/dispatch loaded (no supervise, no runs) | ${store} kB | ${ratio.toFixed(2)}x |`);
    lines.push('', `TARGET idle RSS ratio <= ${RSS_TARGET}x (store open, no runs): ${ratio.toFixed(2)}x ${ratio <= RSS_TARGET ? 'PASS' : 'MISS'}`);
  } finally {
    fs.rmSync(dbDir, { recursive: true, force: true });
  }
  const deps = productionDependencyDirs();
  const depsKb = deps.reduce((sum, dir) => sum + duKb(dir), 0);
  const ownKb = ['dist/lib', 'prebuilds', 'native', 'docs'].reduce((sum, dir) => sum + duKb(path.join(root, dir)), 0);
  lines.push('', `Installed size: ${deps.length} production packages ${(depsKb / 1024).toFixed(1)} MB on disk (better-sqlite3 as built from source here, with its build tree) + pidfence's own files ~${(ownKb / 1024).toFixed(1)} MB.`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

main();
