// A local stop in milliseconds (issue 25; docs/decisions/0175-0177, 0210-0212). Not a test.
// One run, side by side, on one SQLite store, with real `pidfence` processes and a C job that
// records when its first instruction and its TERM handler ran (bench/fixtures/term-recorder.c):
// 1. `pidfence cancel` returns → TERM at the job, for a foreground `pidfence run` and for a
//    `pidfence supervise` holding 1,000 running runs; the cancel's own wall time; `node -e 0`
//    timed in the same trials as the baseline;
// 2. `pidfence run --timeout` deadline → TERM at the job (lateness against the stored deadline);
// 3. `pidfence run` invocation → the job's first instruction, against `node -e 0`;
//    and, in the same trials, the floor of a durable cancel (bench/fixtures/cli-floor.ts,
//    docs/decisions/0213): commander, the addon's boot clock, better-sqlite3 and one synced commit;
// 4. idle wake-ups per minute and RSS of idle supervises against bare node + better-sqlite3
//    (bench/lib/held-runs.ts, the measure of bench/edge-footprint.ts).
// Run: npm run bench:wake (PIDFENCE_BENCH_TRIALS, default 40; PIDFENCE_BENCH_IDLE_MS, default 30000)
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { spawnGroupLeader, type SpawnedJob } from '../lib/process/index';
import { openSqliteStore } from '../lib/store/sqlite/index';
import {
  count,
  idleRows,
  killGroup,
  readRow,
  seedHeldRuns,
  seedRunningAttempt,
  sleep,
  superviseRunnerId,
  until,
} from './lib/held-runs';
import { machineHeader, runBenchmark } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid } from './lib/table';

const root = path.resolve(__dirname, '..', '..');
const CLI = path.join(root, 'dist', 'lib', 'cli', 'main.js');
const WORK_DIR = path.join(root, 'bench', '.work');
const RECORDER = path.join(WORK_DIR, 'term-recorder');
const FLOOR = path.join(__dirname, 'fixtures', 'cli-floor.js');
const TRIALS = Number(process.env.PIDFENCE_BENCH_TRIALS ?? 40);
const IDLE_MS = Number(process.env.PIDFENCE_BENCH_IDLE_MS ?? 30_000);
const HELD_RUNS = 1_000;
/** After a run started: its runner is past its first cycles, idle on its cadence. */
const QUIET_MS = 300;
const TIMEOUT_MS = 1_000;
const TARGETS = {
  stopP50Ms: 10,
  stopP99Ms: 25,
  deadlineP99Ms: 20,
  startRatio: 1.5,
  wakeupsPerMinute: 12,
  rssRatio: 1.2,
} as const;

const monotonicNs = (): bigint => process.hrtime.bigint();

function compileRecorder(): void {
  fs.mkdirSync(WORK_DIR, { recursive: true });
  execFileSync(
    'cc',
    ['-O2', '-Wall', '-Wextra', '-Werror', '-o', RECORDER, path.join(root, 'bench', 'fixtures', 'term-recorder.c')],
    { stdio: 'inherit' },
  );
}

/** "monotonic boottime" in ns, as the recorder wrote it, once the file exists. */
async function recorded(file: string, timeoutMs = 20_000): Promise<{ monotonic: bigint; boottime: bigint }> {
  await until(
    () => fs.existsSync(file) && fs.readFileSync(file, 'utf8').endsWith('\n'),
    `the job to write ${path.basename(file)}`,
    timeoutMs,
  );
  const [monotonic = '0', boottime = '0'] = fs.readFileSync(file, 'utf8').trim().split(' ');
  return { monotonic: BigInt(monotonic), boottime: BigInt(boottime) };
}

const ms = (ns: bigint): number => Number(ns) / 1e6;

/** Wall time of one process run to its end. */
function wallMs(command: string, args: readonly string[]): number {
  const started = monotonicNs();
  const result = spawnSync(command, args, { stdio: 'ignore' });
  if (result.status !== 0) throw new Error(`bench: ${command} ${args.join(' ')} exited ${result.status}`);
  return ms(monotonicNs() - started);
}

/** `pidfence cancel RUN`: its wall time, and the monotonic time it returned. */
function timedCancel(file: string, runId: string): { wallMs: number; returned: bigint } {
  const started = monotonicNs();
  const result = spawnSync(process.execPath, [CLI, 'cancel', '--db', file, runId], { encoding: 'utf8' });
  const returned = monotonicNs();
  if (result.status !== 0 || !result.stdout.includes('its runner stops the job'))
    throw new Error(`bench: cancel said ${result.stdout}${result.stderr}`);
  return { wallMs: ms(returned - started), returned };
}

interface Foreground {
  readonly runId: string;
  readonly exited: Promise<unknown>;
  readonly firstInstructionMs: number;
}

/** Every `pidfence` process this benchmark started: a failed trial never leaves one behind. */
const started: SpawnedJob[] = [];

async function stopStarted(): Promise<void> {
  for (const job of started.splice(0)) await killGroup(job.identity, job.exit);
}

/** `pidfence run [--timeout] -- term-recorder OUT`: started, its job's first instruction timed from the invocation. */
async function foregroundRun(file: string, out: string, extra: readonly string[] = []): Promise<Foreground> {
  const invoked = monotonicNs();
  const runner = spawnGroupLeader(
    process.execPath,
    [CLI, 'run', '--db', file, '--grace', '2s', ...extra, '--', RECORDER, out],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  started.push(runner);
  let said = '';
  runner.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    said += chunk;
  });
  const exited = runner.exit;
  const start = await recorded(`${out}.start`);
  await until(() => /run (\S+) started/.test(said), 'the run to say its id');
  return {
    runId: /run (\S+) started/.exec(said)?.[1] as string,
    exited,
    firstInstructionMs: ms(start.monotonic - invoked),
  };
}

interface Samples {
  readonly stopMs: number[];
  readonly cancelWallMs: number[];
  readonly bareNodeMs: number[];
}

/** Trials of: `node -e 0`, then a cancel of a foreground run; and the run's start, against `node -e 0` too. */
async function foregroundTrials(
  dir: string,
  file: string,
): Promise<
  Samples & { readonly firstInstructionMs: number[]; readonly bareForStartMs: number[]; readonly floorMs: number[] }
> {
  const samples = {
    stopMs: [] as number[],
    cancelWallMs: [] as number[],
    bareNodeMs: [] as number[],
    firstInstructionMs: [] as number[],
    bareForStartMs: [] as number[],
    floorMs: [] as number[],
  };
  for (let i = 0; i < TRIALS; i++) {
    const out = path.join(dir, `fg-${i}`);
    samples.bareForStartMs.push(wallMs(process.execPath, ['-e', '0']));
    const run = await foregroundRun(file, out);
    samples.firstInstructionMs.push(run.firstInstructionMs);
    await sleep(QUIET_MS);
    samples.bareNodeMs.push(wallMs(process.execPath, ['-e', '0']));
    samples.floorMs.push(wallMs(process.execPath, [FLOOR, path.join(dir, 'floor.db')]));
    const cancel = timedCancel(file, run.runId);
    const term = await recorded(`${out}.term`);
    samples.cancelWallMs.push(cancel.wallMs);
    samples.stopMs.push(ms(term.monotonic - cancel.returned));
    await run.exited;
  }
  return samples;
}

/** A supervise holding HELD_RUNS idle running runs; each trial adds one recorder job it owns and cancels it. */
async function superviseTrials(dir: string): Promise<Samples> {
  const file = path.join(dir, 'supervise.db');
  openSqliteStore(file).close();
  const supervise = spawnGroupLeader(process.execPath, [CLI, 'supervise', '--db', file, '--grace', '2s'], {
    cwd: root,
    stdio: 'ignore',
  });
  started.push(supervise);
  const held: SpawnedJob[] = [];
  const samples = { stopMs: [] as number[], cancelWallMs: [] as number[], bareNodeMs: [] as number[] };
  try {
    const runnerId = await superviseRunnerId(file);
    await seedHeldRuns(file, runnerId, HELD_RUNS, held);
    for (let i = 0; i < TRIALS; i++) {
      const out = path.join(dir, `sv-${i}`);
      const job = spawnGroupLeader(RECORDER, [out], { stdio: 'ignore' });
      held.push(job);
      await recorded(`${out}.start`);
      await seedRunningAttempt(file, runnerId, `stop-${i}`, job);
      await sleep(QUIET_MS);
      samples.bareNodeMs.push(wallMs(process.execPath, ['-e', '0']));
      const cancel = timedCancel(file, `stop-${i}`);
      const term = await recorded(`${out}.term`);
      samples.cancelWallMs.push(cancel.wallMs);
      samples.stopMs.push(ms(term.monotonic - cancel.returned));
    }
    if (
      count(file, "SELECT count(*) AS n FROM attempts WHERE status = 'running' AND run_id LIKE 'idle-%'") !== HELD_RUNS
    )
      throw new Error('bench: the held runs did not stay running');
  } finally {
    await killGroup(supervise.identity, supervise.exit);
    for (const job of held) await killGroup(job.identity, job.exit);
  }
  return samples;
}

/** `pidfence run --timeout 1s`: TERM at the job minus the stored deadline, both on the boot clock. */
async function deadlineTrials(dir: string, file: string): Promise<number[]> {
  const late: number[] = [];
  for (let i = 0; i < TRIALS; i++) {
    const out = path.join(dir, `dl-${i}`);
    const run = await foregroundRun(file, out, ['--timeout', `${TIMEOUT_MS}ms`]);
    const term = await recorded(`${out}.term`, TIMEOUT_MS + 20_000);
    // The store's clock is its boot anchor plus CLOCK_BOOTTIME (docs/decisions/0160): the deadline on the boot clock.
    const bootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const anchor = readRow<{ wall: number; boot: number }>(
      file,
      'SELECT anchor_wall_ms AS wall, anchor_boot_ms AS boot FROM store_clock_anchors WHERE boot_id = ?',
      bootId,
    );
    const deadline = readRow<{ at: number }>(
      file,
      'SELECT deadline_at_ms AS at FROM attempts WHERE run_id = ?',
      run.runId,
    );
    if (anchor === undefined || deadline === undefined)
      throw new Error('bench: no boot anchor or deadline in the store');
    late.push(ms(term.boottime) - (deadline.at - anchor.wall + anchor.boot));
    await run.exited;
  }
  return late;
}

const fmt = (value: number): string => `${value.toFixed(1)} ms`;
const verdict = (ok: boolean): string => (ok ? 'PASS' : 'MISS');

function stopRows(name: string, samples: Samples): string[] {
  return [
    name,
    fmt(quantile(samples.stopMs, 0.5)),
    fmt(quantile(samples.stopMs, 0.99)),
    fmt(quantile(samples.cancelWallMs, 0.5)),
    fmt(quantile(samples.bareNodeMs, 0.5)),
    `${(quantile(samples.cancelWallMs, 0.5) / quantile(samples.bareNodeMs, 0.5)).toFixed(2)}x`,
  ];
}

async function main(dir: string): Promise<string[]> {
  compileRecorder();
  const lines: string[] = [
    '## A local stop in milliseconds',
    '',
    machineHeader([
      `${TRIALS} trials per row; ${HELD_RUNS} idle runs held by the supervise; idle window ${IDLE_MS / 1000} s; the job is bench/fixtures/term-recorder.c`,
      'TERM time: CLOCK_MONOTONIC read first thing in the job\'s TERM handler; "cancel returned": the bench saw the cancel process exit (negative: TERM came first)',
    ]),
    '',
  ];
  const file = path.join(dir, 'foreground.db');
  openSqliteStore(file).close();
  let foreground: Awaited<ReturnType<typeof foregroundTrials>>;
  let supervised: Samples;
  let deadlines: number[];
  try {
    foreground = await foregroundTrials(dir, file);
    supervised = await superviseTrials(dir);
    deadlines = await deadlineTrials(dir, file);
  } finally {
    await stopStarted();
  }
  lines.push(
    renderGrid(
      ['cancel → TERM at the job', 'p50', 'p99', '`pidfence cancel` wall p50', '`node -e 0` p50', 'cancel / node'],
      [
        stopRows('foreground `pidfence run`', foreground),
        stopRows(`\`pidfence supervise\` holding ${HELD_RUNS} runs`, supervised),
      ],
      [false, true, true, true, true, true],
    ),
  );
  const startRatio = quantile(foreground.firstInstructionMs, 0.5) / quantile(foreground.bareForStartMs, 0.5);
  const floorRatio = quantile(foreground.floorMs, 0.5) / quantile(foreground.bareNodeMs, 0.5);
  lines.push(
    '',
    renderGrid(
      ['start and deadline', 'p50', 'p99', 'vs `node -e 0` p50'],
      [
        [
          "`pidfence run` invoked → job's first instruction",
          fmt(quantile(foreground.firstInstructionMs, 0.5)),
          fmt(quantile(foreground.firstInstructionMs, 0.99)),
          `${startRatio.toFixed(2)}x`,
        ],
        [
          '`node -e 0` (same trials)',
          fmt(quantile(foreground.bareForStartMs, 0.5)),
          fmt(quantile(foreground.bareForStartMs, 0.99)),
          '1.00x',
        ],
        [
          'floor of a durable cancel (bench/fixtures/cli-floor.ts), with the cancels',
          fmt(quantile(foreground.floorMs, 0.5)),
          fmt(quantile(foreground.floorMs, 0.99)),
          `${floorRatio.toFixed(2)}x`,
        ],
        [
          `\`--timeout ${TIMEOUT_MS / 1000}s\` deadline → TERM at the job (lateness)`,
          fmt(quantile(deadlines, 0.5)),
          fmt(quantile(deadlines, 0.99)),
          '',
        ],
      ],
      [false, true, true, true],
    ),
  );
  const rows = await idleRows({ dir, cli: CLI, cwd: root, heldRuns: HELD_RUNS, settleMs: 5_000, idleMs: IDLE_MS });
  const bare = rows[0]?.rssKb ?? Number.NaN;
  lines.push(
    '',
    renderGrid(
      ['process, idle', 'RSS', 'RSS vs bare', 'wake-ups per minute'],
      rows.map((row) => [
        row.name,
        `${row.rssKb} kB`,
        `${(row.rssKb / bare).toFixed(2)}x`,
        row.wakeupsPerMinute.toFixed(0),
      ]),
      [false, true, true, true],
    ),
  );
  const held = rows[3];
  const cancelRatio = quantile(foreground.cancelWallMs, 0.5) / quantile(foreground.bareNodeMs, 0.5);
  lines.push('');
  for (const [name, samples] of [
    ['foreground run', foreground],
    [`supervise holding ${HELD_RUNS} runs`, supervised],
  ] as const) {
    const p50 = quantile(samples.stopMs, 0.5);
    const p99 = quantile(samples.stopMs, 0.99);
    lines.push(
      `- ${verdict(p50 <= TARGETS.stopP50Ms && p99 <= TARGETS.stopP99Ms)} cancel returns → TERM, ${name}: p50 ${fmt(p50)}, p99 ${fmt(p99)} (target p50 <= ${TARGETS.stopP50Ms} ms, p99 <= ${TARGETS.stopP99Ms} ms; ~800 ms before the wake-up)`,
    );
  }
  const lateP99 = quantile(deadlines, 0.99);
  lines.push(
    `- ${verdict(lateP99 <= TARGETS.deadlineP99Ms)} --timeout deadline → TERM lateness p99: ${fmt(lateP99)} (target <= ${TARGETS.deadlineP99Ms} ms)`,
  );
  lines.push(
    `- ${verdict(cancelRatio <= TARGETS.startRatio)} \`pidfence cancel\` wall time vs \`node -e 0\`: ${cancelRatio.toFixed(2)}x (target <= ${TARGETS.startRatio}x; medians, same trials)`,
  );
  lines.push(
    `- ${verdict(startRatio <= TARGETS.startRatio)} \`pidfence run\` → job's first instruction vs \`node -e 0\`: ${startRatio.toFixed(2)}x (target <= ${TARGETS.startRatio}x; medians, same trials)`,
  );
  lines.push(
    `- floor of a durable cancel vs \`node -e 0\`: ${floorRatio.toFixed(2)}x (commander, the addon's boot clock, better-sqlite3, one synced commit; no pidfence logic; docs/decisions/0213)`,
  );
  if (held !== undefined) {
    lines.push(
      `- ${verdict(held.wakeupsPerMinute <= TARGETS.wakeupsPerMinute)} idle wake-ups per minute of an edge supervise holding ${HELD_RUNS} runs: ${held.wakeupsPerMinute.toFixed(0)} (target <= ${TARGETS.wakeupsPerMinute}, as before the wake-up channel)`,
    );
    lines.push(
      `- ${verdict(held.rssKb / bare <= TARGETS.rssRatio)} idle RSS of that supervise vs bare node + better-sqlite3: ${(held.rssKb / bare).toFixed(2)}x (target <= ${TARGETS.rssRatio}x; 1.17x before)`,
    );
  }
  return lines;
}

runBenchmark('pidfence-stop-', main);
