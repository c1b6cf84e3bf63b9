// Launcher footprint (issue 27 item 0; docs/decisions/0151). Not a test. Side by side in one run:
// the native launcher (what `pidfence run` starts) and the Node launcher it replaced (kept only as
// bench/fixtures/node-launcher.ts).
// 1. Memory per running job: each launcher's VmRSS and Pss (its proportional share of shared pages,
//    from /proc/<pid>/smaps_rollup) while its job (`sleep`) runs; median over JOBS launchers.
// 2. Start: launch call → the job's first instruction. The job is `date +%s%N`, which prints the
//    wall clock as it starts; the bench takes the wall clock (performance.timeOrigin + now()) just
//    before the launch. Both sides include `date`'s own start, so the difference is the launcher's.
// Run: npm run bench:launcher (PIDFENCE_BENCH_LAUNCHES, default 30)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Writable } from 'node:stream';

import { launchAttempt, type LaunchRequest } from '../lib/execution/index';
import { LAUNCH_ORDER_FD } from '../lib/execution/launch-order';
import { ensureReceiptDirectory, RECEIPT_CALLBACK_SEQ } from '../lib/execution/receipts';
import { captureIdentity, launcherPath, signalVerified, type ProcessIdentity } from '../lib/native/index';
import { spawnGroupLeader } from '../lib/process/index';
import type { NodeLaunchOrder } from './fixtures/node-launcher';
import { machineHeader } from './lib/machine';
import { summarize } from './lib/stats';
import { renderGrid, renderTargets, type Target } from './lib/table';

const JOBS = 10;
const LAUNCHES = Number(process.env.PIDFENCE_BENCH_LAUNCHES ?? 30);
/** The targets: ≤ 1 MB per running job, start ≤ 0.5× the Node launcher's. */
const RSS_TARGET_KB = 1024;
const START_TARGET = 0.5;
const SETTLE_MS = 500;
const TOKEN = 'B'.repeat(43);
const NODE_LAUNCHER = path.join(__dirname, 'fixtures', 'node-launcher.js');

type Kind = 'native' | 'node';
const KINDS: readonly Kind[] = ['native', 'node'];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Started {
  readonly identity: ProcessIdentity;
  readonly exited: Promise<void>;
}

let sequence = 0;

/** One launch of `command args` by either launcher, stdout to `stdout` (an fd). */
function start(kind: Kind, dir: string, command: string, args: readonly string[], stdout: number | 'ignore'): Started {
  sequence += 1;
  const attemptId = `bench-${kind}-${sequence}`;
  const request: LaunchRequest = {
    receiptDirectory: dir,
    runId: 'bench',
    attemptId,
    token: TOKEN,
    command,
    args,
    stdio: ['ignore', stdout, 'ignore'],
  };
  if (kind === 'native') {
    const launched = launchAttempt(request);
    const identity = launched.pid === null ? null : captureIdentity(launched.pid);
    if (identity === null) throw new Error('bench: the native launcher was not captured');
    return { identity, exited: launched.exited };
  }
  const spawned = spawnGroupLeader(process.execPath, [NODE_LAUNCHER], { stdio: ['ignore', stdout, 'ignore', 'pipe'] });
  if (spawned.identity === null) throw new Error('bench: the Node launcher was not captured');
  const order: NodeLaunchOrder = {
    receiptDirectory: dir,
    runId: 'bench',
    attemptId,
    seq: RECEIPT_CALLBACK_SEQ,
    token: TOKEN,
    command,
    args,
  };
  (spawned.child.stdio[LAUNCH_ORDER_FD] as Writable).end(JSON.stringify(order));
  return { identity: spawned.identity, exited: spawned.exit.then(() => undefined) };
}

function memoryKb(pid: number): { rss: number; pss: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return { rss: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1]), pss: Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1]) };
}

async function memory(kind: Kind, dir: string): Promise<{ rss: number; pss: number }> {
  const jobs = Array.from({ length: JOBS }, () => start(kind, dir, 'sleep', ['30'], 'ignore'));
  await sleep(SETTLE_MS);
  const samples = jobs.map((job) => memoryKb(job.identity.pid));
  for (const job of jobs) signalVerified(job.identity, 'SIGKILL', { group: true }); // the proved group: launcher and job
  await Promise.all(jobs.map((job) => job.exited));
  return { rss: summarize(samples.map((s) => s.rss)).median, pss: summarize(samples.map((s) => s.pss)).median };
}

async function startMs(kind: Kind, dir: string): Promise<number> {
  const file = path.join(dir, `start-${kind}`);
  const fd = fs.openSync(file, 'w');
  const before = performance.timeOrigin + performance.now();
  const job = start(kind, dir, 'date', ['+%s%N'], fd);
  fs.closeSync(fd);
  await job.exited;
  const printedNs = BigInt(fs.readFileSync(file, 'utf8').trim());
  return Number(printedNs / 1000n) / 1000 - before;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-launcher-'));
  ensureReceiptDirectory(dir);
  try {
    console.log('# Launcher footprint: native launcher vs the Node launcher it replaced\n');
    console.log(
      machineHeader([
        `native launcher: ${path.relative(path.resolve(__dirname, '..', '..'), launcherPath())} (${fs.statSync(launcherPath()).size} bytes)`,
        `memory: median of ${JOBS} launchers each running \`sleep 30\`, read after ${SETTLE_MS} ms; start: median of ${LAUNCHES} launches of \`date +%s%N\`, interleaved`,
      ]),
    );
    const mem = new Map<Kind, { rss: number; pss: number }>();
    for (const kind of KINDS) mem.set(kind, await memory(kind, dir));
    const starts = new Map<Kind, number[]>(KINDS.map((kind) => [kind, []]));
    for (let i = 0; i < LAUNCHES; i += 1) for (const kind of KINDS) starts.get(kind)?.push(await startMs(kind, dir));
    const row = (kind: Kind): string[] => {
      const m = mem.get(kind) ?? { rss: Number.NaN, pss: Number.NaN };
      const s = summarize(starts.get(kind) ?? []);
      return [
        kind === 'native' ? 'native launcher (C, static)' : 'Node launcher (before)',
        `${m.rss} kB`,
        `${m.pss} kB`,
        `${s.median.toFixed(2)} ms`,
        `${s.p99.toFixed(2)} ms`,
      ];
    };
    console.log('');
    console.log(
      renderGrid(
        ['launcher', 'VmRSS / job', 'Pss / job', 'start median', 'start p99'],
        [row('native'), row('node')],
        [false, true, true, true, true],
      ),
    );
    const nativeStart = summarize(starts.get('native') ?? []).median;
    const nodeStart = summarize(starts.get('node') ?? []).median;
    const targets: Target[] = [
      {
        name: 'memory per running job (Pss)',
        ratio: (mem.get('native')?.pss ?? Number.NaN) / RSS_TARGET_KB,
        op: '<=',
        limit: 1,
        detail: `native Pss / ${RSS_TARGET_KB} kB; VmRSS / 1 MB = ${((mem.get('native')?.rss ?? Number.NaN) / RSS_TARGET_KB).toFixed(2)}x`,
      },
      {
        name: "start to the job's first instruction",
        ratio: nativeStart / nodeStart,
        op: '<=',
        limit: START_TARGET,
        detail: 'native median / Node launcher median, same run',
      },
      {
        name: 'memory vs the Node launcher (Pss)',
        ratio: (mem.get('native')?.pss ?? Number.NaN) / (mem.get('node')?.pss ?? Number.NaN),
        op: '<=',
        limit: 1,
        detail: 'native / Node launcher, same run',
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
