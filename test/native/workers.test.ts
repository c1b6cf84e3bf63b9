// The addon under worker_threads: each trial runs in its own process (worker-scenario-child.ts), so a
// crash shows up as that process's signal. All addon state is per environment and a cleanup hook
// closes a worker's pidfds and poll handles before its loop closes (docs/decisions/0007).
import { spawn } from 'node:child_process';
import * as path from 'node:path';

import test from 'ava';

import { SCENARIOS, type Scenario } from './worker-scenario-child';

const TRIALS = 20;
const PARALLEL = 4;
const scenarioScript = path.join(__dirname, 'worker-scenario-child.js');

interface TrialEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

function runTrial(scenario: Scenario): Promise<TrialEnd> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [scenarioScript, scenario], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    // 'close', not 'exit': only then has all of its output been read (on a loaded machine 'exit'
    // comes first, and a clean trial would look silent).
    child.on('close', (code, signal) => resolve({ code, signal, output }));
  });
}

async function runTrials(scenario: Scenario): Promise<TrialEnd[]> {
  const ends: TrialEnd[] = [];
  for (let started = 0; started < TRIALS; started += PARALLEL) {
    const batch = Math.min(PARALLEL, TRIALS - started);
    ends.push(...(await Promise.all(Array.from({ length: batch }, () => runTrial(scenario)))));
  }
  return ends;
}

const titles: Record<Scenario, string> = {
  'concurrent-wait': 'the main thread and a worker calling waitExit at once',
  'terminate-pending-wait': 'terminating a worker with a pending waitExit',
  'terminate-holding': 'terminating a worker that holds a group hold',
};

for (const scenario of SCENARIOS) {
  test(`${titles[scenario]}: no crash in ${TRIALS} of ${TRIALS} trials`, async (t) => {
    const ends = await runTrials(scenario);
    const clean = ends.filter((end) => end.code === 0 && end.signal === null && end.output === 'ok\n');
    const failures = ends.filter((end) => !clean.includes(end));
    t.log(`${failures.length} of ${TRIALS} trials crashed or failed`);
    for (const end of failures.slice(0, 3)) t.log(`code ${end.code} signal ${end.signal}: ${end.output.slice(0, 300)}`);
    t.is(clean.length, TRIALS);
  });
}
