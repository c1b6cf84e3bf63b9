// What keeping a job's log costs (issue 33 item 5; docs/decisions/0250). Not a test. Side by side in
// one run, the native launcher without a log (the job writes straight to a file, as before) and with
// one (the job writes to a pipe; the launcher's copy thread writes the log, rotating at its cap):
// 1. Throughput: a job writing BYTES with `head -c BYTES /dev/zero`, launch to exit; median over RUNS.
// 2. Lines: a job printing LINES short lines through a shell loop (many small writes), launch to exit.
// 3. Memory per running job: the launcher's VmRSS and Pss while its job (`sleep`) runs; median over JOBS.
// Run: npm run bench:joblog (PIDFENCE_BENCH_LOG_RUNS, default 10)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { launchAttempt, type LaunchRequest } from '../lib/execution/index';
import { ensureLogDirectory, JOB_LOG_MAX_BYTES_DEFAULT } from '../lib/execution/job-log';
import { ensureReceiptDirectory } from '../lib/execution/receipts';
import { captureIdentity, signalVerified } from '../lib/native/index';
import { machineHeader } from './lib/machine';
import { summarize } from './lib/stats';
import { renderGrid, renderTargets, type Target } from './lib/table';

const RUNS = Number(process.env.PIDFENCE_BENCH_LOG_RUNS ?? 10);
const BYTES = 64 * 1024 * 1024;
const LINES = 20_000;
const JOBS = 10;
const SETTLE_MS = 500;
const TOKEN = 'C'.repeat(43);
/** The decision's bound: keeping the log may cost at most this much time on a bulk writer. */
const THROUGHPUT_TARGET = 1.5;
/** The launcher's budget per running job (docs/decisions/0151): 1 MB, the copy thread included. */
const MEMORY_BUDGET_KB = 1024;

type Kind = 'without log' | 'with log';
const KINDS: readonly Kind[] = ['without log', 'with log'];

let sequence = 0;

/** Launches `sh -c script`; without a log its stdout is `out`, with one the launcher owns it. */
function launch(
  kind: Kind,
  dir: string,
  script: string,
  out: number | 'ignore',
): { exited: Promise<void>; pid: number | null } {
  sequence += 1;
  const request: LaunchRequest = {
    receiptDirectory: dir,
    runId: `bench-${sequence}`,
    attemptId: `bench-${sequence}-a1`,
    token: TOKEN,
    command: 'sh',
    args: ['-c', script],
    stdio: ['ignore', out, 'ignore'],
    ...(kind === 'with log'
      ? { log: { directory: path.join(dir, 'logs'), maxBytes: JOB_LOG_MAX_BYTES_DEFAULT, keep: 2 } }
      : {}),
  };
  const launched = launchAttempt(request);
  return { exited: launched.exited, pid: launched.pid };
}

async function timedMs(kind: Kind, dir: string, script: string): Promise<number> {
  // Without a log the job writes to a file of its own; with one the log is that file (no tee: ignored).
  const fd = kind === 'without log' ? fs.openSync(path.join(dir, `out-${sequence}`), 'w') : 'ignore';
  const before = performance.now();
  const job = launch(kind, dir, script, fd);
  if (typeof fd === 'number') fs.closeSync(fd);
  await job.exited;
  return performance.now() - before;
}

function memoryKb(pid: number): { rss: number; pss: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return { rss: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1]), pss: Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1]) };
}

async function memory(kind: Kind, dir: string): Promise<{ rss: number; pss: number }> {
  const jobs = Array.from({ length: JOBS }, () => launch(kind, dir, 'echo started; exec sleep 30', 'ignore'));
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const samples = jobs.map((job) => memoryKb(job.pid ?? 0));
  for (const job of jobs) {
    const identity = job.pid === null ? null : captureIdentity(job.pid);
    if (identity !== null) signalVerified(identity, 'SIGKILL', { group: true }); // the proved group: launcher and job
  }
  await Promise.all(jobs.map((job) => job.exited));
  return { rss: summarize(samples.map((s) => s.rss)).median, pss: summarize(samples.map((s) => s.pss)).median };
}

function cleanOutputs(dir: string): void {
  for (const name of fs.readdirSync(dir)) if (name.startsWith('out-')) fs.rmSync(path.join(dir, name));
  fs.rmSync(path.join(dir, 'logs'), { recursive: true, force: true });
  ensureLogDirectory(path.join(dir, 'logs'));
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-joblog-'));
  ensureReceiptDirectory(dir);
  ensureLogDirectory(path.join(dir, 'logs'));
  try {
    console.log('# Job logs: what keeping the output costs (native launcher, without and with a log)\n');
    console.log(
      machineHeader([
        `bulk: \`head -c ${BYTES} /dev/zero\`; lines: ${LINES} \`echo\`s from a shell loop; median of ${RUNS} runs each, interleaved; log cap 10 MiB, 2 kept (rotates ~6 times on bulk)`,
        `memory: median of ${JOBS} launchers each running \`sleep 30\`, read after ${SETTLE_MS} ms; files in ${os.tmpdir()}`,
      ]),
    );
    const bulk = new Map<Kind, number[]>(KINDS.map((kind) => [kind, []]));
    const lines = new Map<Kind, number[]>(KINDS.map((kind) => [kind, []]));
    for (let i = 0; i < RUNS; i += 1) {
      for (const kind of KINDS) {
        bulk.get(kind)?.push(await timedMs(kind, dir, `head -c ${BYTES} /dev/zero`));
        lines
          .get(kind)
          ?.push(await timedMs(kind, dir, `i=0; while [ $i -lt ${LINES} ]; do echo "line $i"; i=$((i+1)); done`));
        cleanOutputs(dir);
      }
    }
    const mem = new Map<Kind, { rss: number; pss: number }>();
    for (const kind of KINDS) mem.set(kind, await memory(kind, dir));
    const median = (map: Map<Kind, number[]>, kind: Kind): number => summarize(map.get(kind) ?? []).median;
    const row = (kind: Kind): string[] => {
      const m = mem.get(kind) ?? { rss: Number.NaN, pss: Number.NaN };
      const mbPerS = BYTES / 1024 / 1024 / (median(bulk, kind) / 1000);
      return [
        kind,
        `${median(bulk, kind).toFixed(1)} ms`,
        `${mbPerS.toFixed(0)} MiB/s`,
        `${median(lines, kind).toFixed(1)} ms`,
        `${m.rss} kB`,
        `${m.pss} kB`,
      ];
    };
    console.log('');
    console.log(
      renderGrid(
        ['launcher', '64 MiB bulk', 'bulk rate', `${LINES} lines`, 'VmRSS / job', 'Pss / job'],
        KINDS.map(row),
        [false, true, true, true, true, true],
      ),
    );
    const targets: Target[] = [
      {
        name: 'bulk writer with its log kept',
        ratio: median(bulk, 'with log') / median(bulk, 'without log'),
        op: '<=',
        limit: THROUGHPUT_TARGET,
        detail: 'with log / without, same run',
      },
      {
        name: 'line writer with its log kept',
        ratio: median(lines, 'with log') / median(lines, 'without log'),
        op: '<=',
        limit: THROUGHPUT_TARGET,
        detail: 'with log / without, same run',
      },
      {
        name: 'memory per running job with its log (Pss)',
        ratio: (mem.get('with log')?.pss ?? Number.NaN) / MEMORY_BUDGET_KB,
        op: '<=',
        limit: 1,
        detail: `with log / ${MEMORY_BUDGET_KB} kB; with / without = ${((mem.get('with log')?.pss ?? Number.NaN) / (mem.get('without log')?.pss ?? Number.NaN)).toFixed(2)}x`,
      },
    ];
    console.log('');
    console.log(renderTargets(targets));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
