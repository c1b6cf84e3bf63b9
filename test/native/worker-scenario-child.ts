// One trial of the addon under worker_threads, run as its own process by workers.test.ts so a
// native crash (SIGSEGV, SIGABRT) ends this process and fails the trial instead of killing the
// test runner. argv[2] names the scenario; a clean trial prints `ok` and exits 0.
import { spawn } from 'node:child_process';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

import {
  captureIdentity,
  acquireGroupHold,
  signalVerified,
  waitExit,
  type ProcessIdentity,
} from '../../lib/native/index';

export const SCENARIOS = ['concurrent-wait', 'terminate-pending-wait', 'terminate-holding'] as const;
export type Scenario = (typeof SCENARIOS)[number];

// Short waits started and cancelled many times over, on both threads at once: every start and
// cancel touches the exit-watch table of the calling environment.
// Bursts: many watches started in one synchronous loop (the table grows and rehashes), then
// cancelled together when their timers fire.
const RACING_ROUNDS = 10;
const WAITS_PER_ROUND = 1000;

interface WorkerInput {
  readonly scenario: Scenario;
  readonly identity: ProcessIdentity;
}

async function racingWaits(identity: ProcessIdentity): Promise<string[]> {
  const outcomes = new Set<string>();
  for (let round = 0; round < RACING_ROUNDS; round++) {
    const batch = await Promise.all(Array.from({ length: WAITS_PER_ROUND }, (_, i) => waitExit(identity, 1 + (i % 3))));
    for (const result of batch) outcomes.add(result.kind);
  }
  return [...outcomes];
}

async function workerMain({ scenario, identity }: WorkerInput): Promise<void> {
  const port = parentPort!;
  switch (scenario) {
    case 'concurrent-wait': {
      port.postMessage({ racing: await racingWaits(identity) });
      const final = waitExit(identity, 10_000);
      port.postMessage('waiting');
      port.postMessage({ final: (await final).kind });
      return;
    }
    case 'terminate-pending-wait':
      void waitExit(identity, 60_000);
      port.postMessage('waiting');
      return;
    case 'terminate-holding': {
      const held = acquireGroupHold(identity);
      port.postMessage(held.kind);
      return;
    }
  }
}

function fail(message: string): never {
  process.stdout.write(`fail ${message}\n`);
  process.exit(1);
}

// Every message the worker sends, in order, whether or not someone is waiting for it yet.
function messageQueue(worker: Worker): () => Promise<unknown> {
  const queued: unknown[] = [];
  const waiting: Array<(message: unknown) => void> = [];
  worker.on('message', (message: unknown) => (waiting.shift() ?? ((m: unknown) => queued.push(m)))(message));
  worker.on('error', (error: unknown) => fail(`the worker threw: ${String(error)}`));
  worker.on('exit', (code) => {
    if (waiting.length > 0) fail(`the worker exited (code ${code}) while a message was awaited`);
  });
  return () => (queued.length > 0 ? Promise.resolve(queued.shift()) : new Promise((resolve) => waiting.push(resolve)));
}

let phase = 'starting';

async function trial(scenario: Scenario): Promise<void> {
  // It must outlive the trial: under load 24 the racing rounds took over 30 s and a `sleep 3600` had
  // ended, so the short waits answered already_exited. The trial stops it itself.
  const job = spawn('sleep', ['3600'], { detached: true, stdio: 'ignore' });
  const identity = captureIdentity(job.pid!);
  if (identity === null) fail('the job exited before its identity was captured');
  const jobExited = new Promise((resolve) => job.once('exit', resolve));
  const worker = new Worker(__filename, { workerData: { scenario, identity } satisfies WorkerInput });
  const nextMessage = messageQueue(worker);
  try {
    if (scenario === 'concurrent-wait') {
      const [mine, theirs] = await Promise.all([racingWaits(identity), nextMessage()]);
      if (!mine.every((outcome) => outcome === 'timeout')) fail(`main thread waits: ${mine.join(',')}`);
      const theirOutcomes = (theirs as { racing: string[] }).racing;
      if (!theirOutcomes.every((outcome) => outcome === 'timeout')) fail(`worker waits: ${theirOutcomes.join(',')}`);
      if ((await nextMessage()) !== 'waiting') fail('the worker did not start its last wait');
      const workerFinal = nextMessage();
      const mainFinal = waitExit(identity, 10_000);
      if (signalVerified(identity, 'SIGKILL', { group: true }).kind !== 'signalled')
        fail('the job could not be stopped');
      const finals = [(await mainFinal).kind, ((await workerFinal) as { final: string }).final];
      if (finals.some((outcome) => outcome !== 'exited')) fail(`final waits: ${finals.join(',')}`);
    } else {
      phase = 'awaiting the worker';
      const said = await nextMessage();
      const expected = scenario === 'terminate-pending-wait' ? 'waiting' : 'held';
      if (said !== expected) fail(`the worker said ${JSON.stringify(said)}`);
      phase = 'terminating the worker';
      await worker.terminate();
    }
  } finally {
    phase = 'stopping the job';
    signalVerified(identity, 'SIGKILL', { group: true });
    await jobExited;
    phase = 'ending the worker';
    await worker.terminate();
  }
  phase = 'done';
  process.stdout.write('ok\n');
}

if (isMainThread && require.main === module) {
  const scenario = process.argv[2] as Scenario;
  if (!SCENARIOS.includes(scenario)) fail(`unknown scenario ${scenario}`);
  // A trial whose awaited promise can no longer settle would otherwise end silently with code 0.
  process.on('beforeExit', () => {
    if (phase !== 'done') fail(`the event loop emptied while ${phase}`);
  });
  trial(scenario).catch((error: unknown) => fail(String(error)));
} else if (!isMainThread) {
  void workerMain(workerData as WorkerInput);
}
