// A stop on a host whose jobs use all its CPU, with and without --job-nice (docs/decisions/0441). Not
// a test. One run, side by side: a local runner on a SQLite store with a wake-up channel (what
// `pidfence cancel` uses), BURNERS jobs that spin on the CPU (a shell loop of builtins, no forks), and
// one target job at a time that records when its TERM handler ran. Each trial commits the target's
// cancel intent and wakes the runner, as `pidfence cancel` does, and measures:
// - cancel committed → TERM at the job (the marker's mtime, so the wall clock);
// - cancel committed → the run recorded `cancelled` (monotonic clock), and how many of those came only
//   after the leftover grace: a leftover that never saw its TERM (docs/decisions/0442).
// Rows: an idle host (no burners) as the floor; burners at the runner's priority (jobNice 0, the
// default, the baseline); burners at jobNice 10. The target always runs at the same nice as the
// burners: it is one of the host's jobs.
// Run: npm run bench:job-nice (PIDFENCE_BENCH_TRIALS, default 30; PIDFENCE_BENCH_BURNERS, default 4 per CPU)
import { randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';

import { createExecution, LEFTOVER_GRACE_DEFAULT_MS, type ExecutionApplication } from '../lib/execution/index';
import { sendWakeUp } from '../lib/execution/wake-channel';
import { openSqliteStore } from '../lib/store/sqlite/index';
import { sleep, until } from './lib/held-runs';
import { machineHeader, runBenchmark } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid } from './lib/table';

const TRIALS = Number(process.env.PIDFENCE_BENCH_TRIALS ?? 30);
const BURNERS = Number(process.env.PIDFENCE_BENCH_BURNERS ?? 4 * availableParallelism());
/** Long enough for the burners to fill every CPU's run queue before the first trial. */
const WARM_UP_MS = 2_000;

interface Scenario {
  readonly name: string;
  readonly burners: number;
  readonly jobNice: number;
}

const SCENARIOS: readonly Scenario[] = [
  { name: 'idle host (floor)', burners: 0, jobNice: 0 },
  { name: `${BURNERS} spinning jobs, jobNice 0 (baseline)`, burners: BURNERS, jobNice: 0 },
  { name: `${BURNERS} spinning jobs, jobNice 10`, burners: BURNERS, jobNice: 10 },
];

interface Samples {
  readonly termMs: number[];
  readonly recordedMs: number[];
}

/** The trap is set before `.up` appears, so a stop after `.up` always leaves the marker. */
function targetJob(marker: string): string[] {
  return ['sh', '-c', `trap 'echo x > ${marker}; exit 143' TERM; echo up > ${marker}.up; sleep 900 & wait`];
}

async function admitted(app: ExecutionApplication, argv: readonly string[]): Promise<string> {
  const [command, ...args] = argv;
  const outcome = await app.admit({ projectId: 'bench', command: command as string, args, stdio: 'ignore' });
  if (outcome.kind !== 'admitted') throw new Error(`not admitted: ${outcome.reason}`);
  return outcome.runId;
}

async function trials(scratch: string, scenario: Scenario, index: number): Promise<Samples> {
  const file = path.join(scratch, `nice-${index}.db`);
  const store = openSqliteStore(file);
  const wakeDirectory = path.join(scratch, `wake-${index}`);
  const app = createExecution({
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
    receiptDirectory: `${file}.receipts`,
    wakeDirectory,
    logs: false,
    jobNice: scenario.jobNice,
  });
  await app.recover();
  app.start();
  const samples: Samples = { termMs: [], recordedMs: [] };
  try {
    for (let b = 0; b < scenario.burners; b++) await admitted(app, ['sh', '-c', 'while :; do :; done']);
    await sleep(scenario.burners === 0 ? 0 : WARM_UP_MS);
    for (let i = 0; i < TRIALS; i++) {
      const marker = path.join(scratch, `target-${index}-${i}`);
      const runId = await admitted(app, targetJob(marker));
      await until(() => existsSync(`${marker}.up`), 'the target up');
      const sentWallMs = Date.now(); // compared with the marker's mtime only
      const sent = performance.now();
      await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
      await sendWakeUp(wakeDirectory, app.runner.runnerId);
      await until(() => existsSync(marker), 'TERM at the target');
      samples.termMs.push(statSync(marker).mtimeMs - sentWallMs);
      await until(async () => (await store.runStore.getRun(runId))?.status === 'cancelled', 'the run recorded');
      samples.recordedMs.push(performance.now() - sent);
    }
  } finally {
    // The drain stops the burners through the runner's own verified path.
    await app.drain();
  }
  return samples;
}

const ms = (value: number): string => `${Math.round(value)} ms`;

function row(scenario: Scenario, samples: Samples, baseline: Samples | undefined): string[] {
  const p50 = quantile(samples.termMs, 0.5);
  const ratio = baseline === undefined ? '' : `${(p50 / quantile(baseline.termMs, 0.5)).toFixed(2)}×`;
  return [
    scenario.name,
    ms(p50),
    ms(quantile(samples.termMs, 0.99)),
    ms(Math.max(...samples.termMs)),
    ms(quantile(samples.recordedMs, 0.5)),
    ms(quantile(samples.recordedMs, 0.99)),
    String(samples.recordedMs.filter((value) => value >= LEFTOVER_GRACE_DEFAULT_MS).length),
    ratio,
  ];
}

runBenchmark('pidfence-bench-job-nice-', async (scratch) => {
  const results: Samples[] = [];
  for (const [index, scenario] of SCENARIOS.entries()) results.push(await trials(scratch, scenario, index));
  const baseline = results[1];
  return [
    '## A stop on a host full of spinning jobs, with and without --job-nice (decision 0441)',
    '',
    machineHeader([`command: npm run bench:job-nice`, `trials per row: ${TRIALS}`]),
    '',
    renderGrid(
      [
        'host',
        'cancel → TERM p50',
        'p99',
        'max',
        'cancel → recorded p50',
        'p99',
        'recorded after the grace',
        'TERM p50 against the baseline',
      ],
      SCENARIOS.map((scenario, i) => row(scenario, results[i] as Samples, baseline)),
      [false, true, true, true, true, true, true, true],
    ),
  ];
});
