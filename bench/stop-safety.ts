// Issue 12: how safely four ways of stopping a job behave — tree-kill, ps-tree + process.kill
// (QingLong 2.x), pm2-style TERM / poll / KILL, and pidfence's LocalProcessController — on a stale
// PID now owned by an innocent process, a fork storm, a stopped job, a TERM-ignoring job, and a
// job whose leader obeys TERM while one member ignores it; then the escape patterns of issue 27
// (bench/lib/escape-trials.ts). Prints one scenario × contender table and the escape table. Run with `npm run bench:safety` as root (PID reuse is
// forced through /proc/sys/kernel/ns_last_pid), under `nice` on a shared machine.
//
// Bare-PID signals on purpose: this file and the bench/signal-latency baselines are the only
// places in lib/ and bench/ where a PID is signalled by number. The contenders below do what
// their originals do, because their bare-PID signals are what this comparison is about. Every
// process the bench itself cleans up goes through pidfence's verified path.
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import psTree from 'ps-tree';
import treeKill from 'tree-kill';

import { capabilities, captureIdentity, readProcessStat, signalVerified, type ProcessIdentity } from '../lib/native';
import {
  LocalProcessController,
  formatHandle,
  handleFromIdentity,
  spawnGroupLeader,
  type SpawnedJob,
} from '../lib/process';
import { runEscapePatterns } from './lib/escape-trials';
import { printSignallingHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid } from './lib/table';
import { lineReader } from '../test/helpers/line-reader';
import { scanProcesses } from '../lib/process/proc-scan';

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE_SOURCE = path.join(ROOT, 'bench', 'fixtures', 'innocent-reuse.c');
/** Gitignored: the fixture is built per machine, never committed. */
const WORK_DIR = path.join(ROOT, 'bench', '.work');
const FIXTURE_BINARY = path.join(WORK_DIR, 'innocent-reuse');

/** `--quick` divides every N by 5: for developing the script, never for docs/. */
const QUICK = process.argv.includes('--quick');
const trials = (n: number): number => (QUICK ? Math.max(2, Math.ceil(n / 5)) : n);
/** Per contender. The cheap scenario gets 100; the others cost seconds per trial on 2 cores. */
const N = {
  stale: trials(100),
  storm: trials(6),
  stopped: trials(20),
  ignoring: trials(20),
  memberIgnoring: trials(6),
  escapes: trials(5),
};
/** `--escapes-only`: just the escape-pattern family (issue 27), e.g. when the full run takes too long. */
const ESCAPES_ONLY = process.argv.includes('--escapes-only');

/** TERM grace for the contenders that escalate (pm2-style, pidfence): the same for both. */
const GRACE_MS = 250;
/** pm2's processIsDead polls kill(pid, 0) every 100 ms. */
const PM2_POLL_MS = 100;
/** The stale PID's original job runs this long in the "later tick" half (> one 10 ms tick). */
const LATER_TICK_RUN_MS = 25;
/** Attempts at a same-tick reuse per even stale-PID round before taking a later-tick one. */
const SAME_TICK_ATTEMPTS = 5;
/** A stale-PID attempt gives up after this many reuses taken by other processes on the machine. */
const MAX_MISSES = 50;
/** How long the fork storm runs before the stop: long enough for a few hundred children. */
const STORM_WARMUP_MS = 200;
/** The issue's measure: group members still alive this long after the stop returned. */
const SURVIVOR_CHECK_MS = 1_000;
/** A job that has not exited this long after the grace ended will not exit by itself. */
const NEVER_AFTER_MS = 500;
/** Lets sh install its traps and start its first `sleep` before anything is signalled. */
const JOB_SETTLE_MS = 100;

const JOBS = {
  // The issue's fork storm: sh keeps starting 5 s sleeps in its own group.
  storm: 'while :; do sleep 5 & done',
  // A job with a graceful TERM handler, as most servers have. While stopped, a process keeps TERM
  // pending whatever its disposition (only KILL and CONT act on a stopped process); the handler
  // shows whether the job got to run it.
  stopped: 'trap "exit 0" TERM; while :; do sleep 1; done',
  // Ignored dispositions survive exec, so the sleeps ignore TERM too: the whole group does.
  ignoring: 'trap "" TERM; while :; do sleep 1; done',
  // The leader dies of TERM; one member (a subshell and its sleeps) ignores it.
  memberIgnoring: '(trap "" TERM; while :; do sleep 1; done) & wait',
} as const;

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const now = (): bigint => process.hrtime.bigint();
const msSince = (t0: bigint, t1: bigint = now()): number => Number(t1 - t0) / 1e6;

// --- contenders ---

interface StopTarget {
  /** What a runner records for every job. */
  readonly pid: number;
  /** pidfence's durable handle text, stored with the Attempt next to the PID. */
  readonly handle: string;
}

interface Contender {
  readonly name: string;
  /** Resolves when the contender considers the job stopped (or gives up). */
  stop(target: StopTarget): Promise<void>;
}

/** `treeKill(pid)` as most callers write it: SIGTERM to the PID and every descendant `ps` lists. */
const treeKillContender: Contender = {
  name: 'tree-kill',
  stop: ({ pid }) => new Promise((resolve) => treeKill(pid, 'SIGTERM', () => resolve())),
};

/** QingLong 2.x `killTask`: ps-tree, then TERM to children (deepest first) and the PID; INT when childless. */
const psTreeContender: Contender = {
  name: 'ps-tree + process.kill',
  stop: ({ pid }) =>
    new Promise((resolve) => {
      psTree(pid, (_error, children) => {
        const pids = (children ?? []).map((row) => Number(row.PID)).filter((child) => !Number.isNaN(child));
        try {
          if (pids.length > 0) {
            // As in QingLong: one try around the loop, so the first ESRCH ends it.
            for (const target of [pid, ...pids].reverse()) process.kill(target, 15);
          } else {
            process.kill(pid, 2);
          }
        } catch {
          // QingLong ignores the error (the job already exited).
        }
        resolve();
      });
    }),
};

/**
 * pm2's killProcess/processIsDead in fork mode without treekill: TERM to the PID, kill(pid, 0)
 * every 100 ms; after the kill timeout SIGKILL to the PID, then poll once more for a kill
 * timeout before giving up.
 */
const pm2Contender: Contender = {
  name: 'pm2-style',
  stop: ({ pid }) =>
    new Promise((resolve) => {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        resolve();
        return;
      }
      const started = Date.now();
      let killed = false;
      const timer = setInterval(() => {
        try {
          process.kill(pid, 0);
        } catch {
          clearInterval(timer);
          resolve();
          return;
        }
        const elapsed = Date.now() - started;
        if (!killed && elapsed >= GRACE_MS) {
          killed = true;
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone between the probe and the kill: the next probe says so.
          }
        } else if (elapsed >= 2 * GRACE_MS) {
          clearInterval(timer);
          resolve();
        }
      }, PM2_POLL_MS);
    }),
};

const controller = new LocalProcessController();
/** pidfence's outcomes per scenario, to show e.g. that every stale handle was refused. */
const pidfenceResults = new Map<string, Map<string, number>>();
let currentScenario = '';

const pidfenceContender: Contender = {
  name: 'pidfence',
  stop: async ({ pid, handle }) => {
    const { result, escalated } = await controller.requestTermination({ attemptPid: pid, handle, graceMs: GRACE_MS });
    const counts = pidfenceResults.get(currentScenario) ?? new Map<string, number>();
    const key = escalated ? `${result} (escalated)` : result;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    pidfenceResults.set(currentScenario, counts);
  },
};

const CONTENDERS: readonly Contender[] = [treeKillContender, psTreeContender, pm2Contender, pidfenceContender];

// --- jobs, /proc scans and verified cleanup ---

interface Job {
  readonly spawned: SpawnedJob;
  readonly identity: ProcessIdentity;
  readonly target: StopTarget;
  /** When the bench saw the leader exit (libuv reaped it): the same observer for every contender. */
  readonly exitedAt: Promise<bigint>;
  exited: boolean;
}

/** Every job's group id, for the final sweep: nothing the bench started may outlive it. */
const jobGroups = new Set<number>();
const liveJobs = new Set<Job>();

function startJob(script: string): Job {
  const spawned = spawnGroupLeader('sh', ['-c', script], { stdio: 'ignore' });
  if (spawned.handleStatus !== 'captured' || spawned.identity === null || spawned.handle === null) {
    throw new Error(`bench: could not start a job (${spawned.handleStatus})`);
  }
  const identity = spawned.identity;
  jobGroups.add(identity.pgid);
  const job: Job = {
    spawned,
    identity,
    target: { pid: identity.pid, handle: spawned.handle },
    exitedAt: spawned.exit.then(() => now()),
    exited: false,
  };
  liveJobs.add(job);
  void job.exitedAt.then(() => {
    job.exited = true;
    liveJobs.delete(job);
  });
  return job;
}

/** What a pidfence trial left behind, printed under the table: pidfence's claim is zero. */
const pidfenceSurvivors: string[] = [];

function describeSurvivors(scenario: string, contender: Contender, job: Job, members: readonly number[]): void {
  if (contender !== pidfenceContender || members.length === 0) return;
  const parts = members.map((pid) => {
    const stat = readProcessStat(pid);
    let comm = '?';
    try {
      comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      // gone meanwhile
    }
    const age =
      stat === null
        ? '?'
        : `${(BigInt(stat.startTicks) - BigInt(job.identity.startTicks)).toString()} clock ticks after the leader`;
    return `${comm} (${pid === job.identity.pgid ? 'leader' : 'member'}, state ${stat?.state ?? '?'}, parent ${stat?.ppid === 1 ? 'init' : stat?.ppid === process.pid ? 'bench' : 'other'}, started ${age})`;
  });
  pidfenceSurvivors.push(`${scenario}: ${parts.join('; ')}`);
}

/** Bit of SIGKILL in the SigPnd/ShdPnd masks of /proc/<pid>/status. */
const SIGKILL_BIT = 1n << 8n;

/**
 * True when SIGKILL is pending: the kernel has already condemned the process (a fatal signal
 * is turned into a pending SIGKILL on every thread) and it only has to be scheduled to exit.
 * Under load, at nice 10 on 2 shared CPUs, that took over a second in a development run.
 */
function dying(pid: number): boolean {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    for (const line of status.split('\n')) {
      const match = /^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/.exec(line);
      if (match?.[1] !== undefined && (BigInt(`0x${match[1]}`) & SIGKILL_BIT) !== 0n) return true;
    }
    return false;
  } catch {
    return true; // gone
  }
}

/**
 * Processes of group `pgid` that are still alive: not zombies (PID 1 reaps them late here) and
 * not already dying of a pending SIGKILL (see `dying`). `dyingOut` collects the latter.
 */
function groupMembers(pgid: number, dyingOut?: number[]): number[] {
  const members: number[] = [];
  for (const { pid, stat } of scanProcesses()) {
    // 'unreadable': its stat could not be parsed while it was being torn down, so it is exiting.
    if (stat === null || stat === 'unreadable' || stat.pgid !== pgid || stat.state === 'Z') continue;
    if (dying(pid)) dyingOut?.push(pid);
    else members.push(pid);
  }
  return members;
}

/**
 * Kills what is left of a job through pidfence's verified path only. While the leader lives, one
 * group SIGKILL through its pidfd reaches everyone. Once the leader is reaped, its pidfd cannot be
 * opened any more, so each orphaned member is proved one by one: its identity is captured from a
 * pidfd and must still name the job's group (a PID reused meanwhile would be in another group:
 * a group id cannot be taken by a new process while the group has members), and the SIGKILL
 * goes through a pidfd that is proved to be that same process.
 */
async function cleanupJob(job: Job): Promise<void> {
  const pgid = job.identity.pgid;
  for (let pass = 0; pass < 100; pass += 1) {
    if (!job.exited) signalVerified(job.identity, 'SIGKILL', { group: true });
    const members = groupMembers(pgid);
    if (members.length === 0 && job.exited) return;
    for (const pid of members) {
      if (pid === pgid) continue;
      let member: ProcessIdentity | null;
      try {
        member = captureIdentity(pid);
      } catch {
        member = null; // it changed under us: the next pass looks again
      }
      if (member !== null && member.pgid === pgid) signalVerified(member, 'SIGKILL');
    }
    await delay(20);
  }
  throw new Error(`bench: group ${pgid} could not be emptied`);
}

// --- stale PID ---

interface StaleTrial {
  readonly sameTick: boolean;
  /** Bitmask of the signals the innocent process received (bit n-1 = signal n). */
  readonly signalMask: number;
  readonly stopMs: number;
}

let staleMisses = 0;
let staleOtherTick = 0;

/**
 * One forced reuse. `missed`: another process on the machine took the PID; `other_tick`: a
 * same-tick reuse was asked for (`requireSameTick`) and did not happen. In both cases the
 * contender is not run and nothing is signalled.
 */
async function staleTrial(
  contender: Contender,
  laterTick: boolean,
  requireSameTick: boolean,
): Promise<StaleTrial | 'missed' | 'other_tick'> {
  const helper = spawn(FIXTURE_BINARY, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  const nextLine = lineReader(helper.stdout, 'bench: the reuse fixture');
  const helperExited = new Promise((resolve) => helper.once('exit', resolve));
  try {
    const [word, pidText] = (await nextLine()).split(' ');
    if (word !== 'original') throw new Error(`bench: reuse fixture said ${word} ${pidText}`);
    const original = captureIdentity(Number(pidText));
    if (original === null) throw new Error('bench: the original exited before capture');
    const target: StopTarget = { pid: original.pid, handle: formatHandle(handleFromIdentity(original)) };
    helper.stdin.write(`go ${laterTick ? LATER_TICK_RUN_MS : 0}\n`);
    const [outcome, successorText] = (await nextLine()).split(' ');
    if (outcome === 'missed') return 'missed';
    if (outcome !== 'successor') throw new Error(`bench: reuse fixture said ${outcome} ${successorText}`);
    const successor = captureIdentity(Number(successorText));
    if (successor === null || successor.pid !== original.pid)
      throw new Error('bench: the innocent process is not running');
    const sameTick = successor.startTicks === original.startTicks;
    if (requireSameTick && !sameTick) return 'other_tick';
    const t0 = now();
    await contender.stop(target);
    const stopMs = msSince(t0);
    helper.stdin.write('check\n');
    const [reportWord, maskText] = (await nextLine()).split(' ');
    if (reportWord !== 'report' || maskText === undefined) throw new Error(`bench: reuse fixture said ${reportWord}`);
    return { sameTick, signalMask: Number.parseInt(maskText, 16), stopMs };
  } finally {
    // EOF makes the fixture kill and reap both of its children through their pidfds.
    helper.stdin.end();
    await helperExited;
  }
}

const SIGNAL_NAMES: Record<number, string> = { 1: 'HUP', 2: 'INT', 9: 'KILL', 15: 'TERM', 18: 'CONT', 19: 'STOP' };

function signalNames(mask: number): string[] {
  const names: string[] = [];
  for (let sig = 1; sig < 32; sig += 1) if (mask & (1 << (sig - 1))) names.push(SIGNAL_NAMES[sig] ?? String(sig));
  return names;
}

// --- results ---

interface Cell {
  trials: number;
  /** Free-form counters per measure. */
  counts: Map<string, number>;
  /** Latency samples in ms per measure. */
  latencies: Map<string, number[]>;
  /** Signal names seen by innocent processes. */
  signals: Set<string>;
}

const results = new Map<string, Cell>();

function cell(scenario: string, contender: string): Cell {
  const key = `${scenario}\u0000${contender}`;
  let found = results.get(key);
  if (!found) {
    found = { trials: 0, counts: new Map(), latencies: new Map(), signals: new Set() };
    results.set(key, found);
  }
  return found;
}

function count(target: Cell, measure: string, by = 1): void {
  target.counts.set(measure, (target.counts.get(measure) ?? 0) + by);
}

function sample(target: Cell, measure: string, ms: number): void {
  const list = target.latencies.get(measure) ?? [];
  list.push(ms);
  target.latencies.set(measure, list);
}

/** Contenders take turns within each round, starting one further each round, so load falls on all alike. */
async function rounds(n: number, run: (contender: Contender, round: number) => Promise<void>): Promise<void> {
  for (let round = 0; round < n; round += 1) {
    for (let k = 0; k < CONTENDERS.length; k += 1) {
      const contender = CONTENDERS[(k + round) % CONTENDERS.length];
      if (contender) await run(contender, round);
    }
  }
}

// --- scenarios ---

const SCENARIO = {
  stale: 'stale PID',
  storm: 'fork storm',
  stopped: 'stopped job',
  ignoring: 'TERM-ignoring job',
  memberIgnoring: 'member ignores TERM',
} as const;

async function runStale(): Promise<void> {
  currentScenario = SCENARIO.stale;
  await rounds(N.stale, async (contender, round) => {
    // Even rounds reuse the PID microseconds after the job started and want the same clock tick:
    // the case start ticks cannot tell apart. The bench's round trip sometimes crosses a tick
    // boundary under load, so such an attempt is discarded before the contender runs, a few
    // times at most. Odd rounds reuse it after the job ran 25 ms (always a later tick). The
    // same-tick count printed is what really happened.
    const wantSameTick = round % 2 === 0;
    let otherTick = 0;
    let trial: StaleTrial | 'missed' | 'other_tick';
    for (;;) {
      trial = await staleTrial(contender, !wantSameTick, wantSameTick && otherTick < SAME_TICK_ATTEMPTS - 1);
      if (trial === 'missed') {
        if (++staleMisses > MAX_MISSES) throw new Error('bench: other processes keep taking the reused PID');
      } else if (trial === 'other_tick') {
        otherTick += 1;
        staleOtherTick += 1;
      } else {
        break;
      }
    }
    const target = cell(SCENARIO.stale, contender.name);
    target.trials += 1;
    if (trial.sameTick) count(target, 'sameTick');
    if (trial.signalMask !== 0) count(target, 'innocentSignalled');
    for (const name of signalNames(trial.signalMask)) target.signals.add(name);
    sample(target, 'stop', trial.stopMs);
  });
}

/** Starts a job, lets `prepare` set it up, stops it with `contender`, and hands the timings to `measure`. */
async function jobTrial(
  script: string,
  contender: Contender,
  prepare: (job: Job) => Promise<void>,
  measure: (job: Job, t0: bigint, t1: bigint) => Promise<void>,
): Promise<void> {
  const job = startJob(script);
  try {
    await delay(JOB_SETTLE_MS);
    await prepare(job);
    const t0 = now();
    await contender.stop(job.target);
    const t1 = now();
    await measure(job, t0, t1);
  } finally {
    await cleanupJob(job);
  }
}

/** Waits until the job exits or `deadlineMs` after t0; records the exit latency or a "never". */
async function awaitExit(job: Job, target: Cell, t0: bigint, deadlineMs: number): Promise<void> {
  const remaining = Math.max(0, deadlineMs - msSince(t0));
  const exitedAt = await Promise.race([job.exitedAt, delay(remaining).then(() => null)]);
  if (exitedAt === null) count(target, 'neverExited');
  else sample(target, 'exit', msSince(t0, exitedAt));
}

/**
 * One job scenario: for each contender, N[key] trials of JOBS[key]; every trial counts and records
 * the stop call's latency before `measure` looks at what the stop left behind.
 */
async function runJobScenario(
  key: 'storm' | 'stopped' | 'ignoring' | 'memberIgnoring',
  prepare: (job: Job) => Promise<void>,
  measure: (job: Job, target: Cell, contender: Contender, t0: bigint, t1: bigint) => Promise<void>,
): Promise<void> {
  currentScenario = SCENARIO[key];
  await rounds(N[key], (contender) =>
    jobTrial(JOBS[key], contender, prepare, async (job, t0, t1) => {
      const target = cell(SCENARIO[key], contender.name);
      target.trials += 1;
      sample(target, 'stop', msSince(t0, t1));
      await measure(job, target, contender, t0, t1);
    }),
  );
}

/** Members that outlive the stop by SURVIVOR_CHECK_MS are survivors; then the leader's exit. */
async function survivorsThenExit(job: Job, target: Cell, contender: Contender, t0: bigint): Promise<void> {
  await delay(SURVIVOR_CHECK_MS);
  const survivors = countGroupLeft(target, contender, job, 'survivors');
  if (survivors > 0) count(target, 'trialsWithSurvivors');
  await awaitExit(job, target, t0, 0);
}

function runStorm(): Promise<void> {
  return runJobScenario('storm', () => delay(STORM_WARMUP_MS - JOB_SETTLE_MS), survivorsThenExit);
}

async function waitUntilStopped(job: Job): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    if (readProcessStat(job.identity.pid)?.state === 'T') return;
    await delay(5);
  }
  throw new Error('bench: the job did not stop');
}

function runStopped(): Promise<void> {
  return runJobScenario(
    'stopped',
    async (job) => {
      // The bench's own signal to its own job, through the verified group path.
      signalVerified(job.identity, 'SIGSTOP', { group: true });
      await waitUntilStopped(job);
    },
    async (job, target, contender, t0, t1) => {
      // "After the grace period": the grace, or the contender's own return if later, plus a margin.
      await awaitExit(job, target, t0, Math.max(msSince(t0, t1), GRACE_MS) + 200);
      if (!job.exited) count(target, 'alive');
      else if ((await job.spawned.exit).code === 0) count(target, 'graceful');
      countGroupLeft(target, contender, job);
    },
  );
}

/** Counts what is left of the job's group (alive, and condemned but not yet gone). */
function countGroupLeft(
  target: ReturnType<typeof cell>,
  contender: Parameters<typeof describeSurvivors>[1],
  job: Parameters<typeof describeSurvivors>[2],
  as: 'groupAlive' | 'survivors' = 'groupAlive',
): number {
  const condemned: number[] = [];
  const members = groupMembers(job.identity.pgid, condemned);
  count(target, 'dying', condemned.length);
  describeSurvivors(currentScenario, contender, job, members);
  count(target, as, members.length);
  return members.length;
}

function runIgnoring(): Promise<void> {
  return runJobScenario(
    'ignoring',
    async () => {},
    async (job, target, contender, t0, t1) => {
      await awaitExit(job, target, t0, Math.max(msSince(t0, t1), GRACE_MS) + NEVER_AFTER_MS);
      countGroupLeft(target, contender, job);
    },
  );
}

function runMemberIgnoring(): Promise<void> {
  return runJobScenario('memberIgnoring', async () => {}, survivorsThenExit);
}

// --- table ---

function ms(value: number): string {
  return Number.isFinite(value) ? `${value < 10 ? value.toFixed(1) : value.toFixed(0)} ms` : 'n/a';
}

function latency(target: Cell, measure: string): string {
  const samples = target.latencies.get(measure) ?? [];
  if (samples.length === 0) return 'n/a';
  return `${ms(quantile(samples, 0.5))} / ${ms(quantile(samples, 0.99))}`;
}

function ofTrials(target: Cell, measure: string): string {
  return `${target.counts.get(measure) ?? 0} / ${target.trials}`;
}

/** A sum over the trials, with the processes already dying of a pending SIGKILL shown apart. */
function total(target: Cell, measure: string): string {
  const dyingCount = target.counts.get('dying') ?? 0;
  return `${target.counts.get(measure) ?? 0}${dyingCount > 0 ? ` (+${dyingCount} dying)` : ''}`;
}

function table(): string {
  const header = ['scenario', 'measure', ...CONTENDERS.map((contender) => contender.name)];
  const body: string[][] = [];
  const add = (scenario: string, label: string, measure: string, value: (target: Cell) => string): void => {
    body.push([label, measure, ...CONTENDERS.map((contender) => value(cell(scenario, contender.name)))]);
  };
  const n = (scenario: string, count: number): string => `${scenario} (N=${count} each)`;

  add(SCENARIO.stale, n(SCENARIO.stale, N.stale), 'innocent processes signalled', (c) =>
    ofTrials(c, 'innocentSignalled'),
  );
  add(SCENARIO.stale, '', 'signals the innocent received', (c) =>
    c.signals.size === 0 ? 'none' : [...c.signals].join(', '),
  );
  add(SCENARIO.stale, '', 'reuses within the same clock tick', (c) => ofTrials(c, 'sameTick'));
  add(SCENARIO.stale, '', 'stop returned, median / p99', (c) => latency(c, 'stop'));

  add(SCENARIO.storm, n(SCENARIO.storm, N.storm), 'group processes alive 1 s after stop returned (sum)', (c) =>
    total(c, 'survivors'),
  );
  add(SCENARIO.storm, '', 'trials with survivors', (c) => ofTrials(c, 'trialsWithSurvivors'));
  add(SCENARIO.storm, '', 'stop returned, median / p99', (c) => latency(c, 'stop'));
  add(SCENARIO.storm, '', 'leader exit seen, median / p99', (c) => latency(c, 'exit'));

  add(SCENARIO.stopped, n(SCENARIO.stopped, N.stopped), `jobs alive after the grace (${GRACE_MS} ms + 200 ms)`, (c) =>
    ofTrials(c, 'alive'),
  );
  add(SCENARIO.stopped, '', 'jobs ended by their own TERM handler', (c) => ofTrials(c, 'graceful'));
  add(SCENARIO.stopped, '', 'group processes alive at that point (sum)', (c) => total(c, 'groupAlive'));
  add(SCENARIO.stopped, '', 'stop request → exit seen, median / p99', (c) => latency(c, 'exit'));

  add(SCENARIO.ignoring, n(SCENARIO.ignoring, N.ignoring), 'stop request → exit seen, median / p99', (c) =>
    latency(c, 'exit'),
  );
  add(SCENARIO.ignoring, '', `never exited (not within grace + ${NEVER_AFTER_MS} ms)`, (c) =>
    ofTrials(c, 'neverExited'),
  );
  add(SCENARIO.ignoring, '', 'stop returned, median / p99', (c) => latency(c, 'stop'));
  add(SCENARIO.ignoring, '', 'group processes alive at that point (sum)', (c) => total(c, 'groupAlive'));

  add(
    SCENARIO.memberIgnoring,
    n(SCENARIO.memberIgnoring, N.memberIgnoring),
    'group processes alive 1 s after stop returned (sum)',
    (c) => total(c, 'survivors'),
  );
  add(SCENARIO.memberIgnoring, '', 'trials with survivors', (c) => ofTrials(c, 'trialsWithSurvivors'));
  add(SCENARIO.memberIgnoring, '', 'leader exit seen, median / p99', (c) => latency(c, 'exit'));
  return renderGrid(header, body, [false, false, true, true, true, true]);
}

function compileFixture(): void {
  fs.mkdirSync(WORK_DIR, { recursive: true });
  execFileSync('cc', ['-O2', '-Wall', '-o', FIXTURE_BINARY, FIXTURE_SOURCE], { stdio: 'inherit' });
}

/** The final check: no process of any job group may be left. Returns how many had to be killed. */
async function finalSweep(): Promise<number> {
  let leftovers = 0;
  for (const pgid of jobGroups) {
    leftovers += groupMembers(pgid).length;
  }
  for (const job of [...liveJobs]) await cleanupJob(job);
  // Processes already dying are not counted above; wait for them too, so `ps` is clean afterwards.
  for (let i = 0; i < 250 && [...jobGroups].some((pgid) => groupMembers(pgid, []).length > 0 || dyingIn(pgid)); i += 1)
    await delay(20);
  return leftovers;
}

function dyingIn(pgid: number): boolean {
  const condemned: number[] = [];
  groupMembers(pgid, condemned);
  return condemned.length > 0;
}

async function main(): Promise<void> {
  printSignallingHeader(
    'stop safety (bench/stop-safety)',
    `contenders take turns within each round; TERM grace ${GRACE_MS} ms for pm2-style and pidfence; pm2 polls every ${PM2_POLL_MS} ms; fork storm stopped ${STORM_WARMUP_MS} ms after start; escape patterns: pidfence through the production launcher (leftover grace ${GRACE_MS} ms)${ESCAPES_ONLY ? '; escape patterns only' : ''}${QUICK ? '; QUICK run (N / 5): not for docs' : ''}`,
  );
  const caps = capabilities();
  if (process.getuid?.() !== 0) {
    console.log('\nForcing a PID reuse needs root (/proc/sys/kernel/ns_last_pid). Stopping.');
    return;
  }
  if (caps.groupSignalMode === 'unsupported') {
    console.log('\npidfence cannot signal on this kernel (no pidfds): nothing to compare. Stopping.');
    return;
  }
  process.once('exit', () => {
    // Last resort if a scenario threw: the verified group path, synchronously.
    for (const job of liveJobs) signalVerified(job.identity, 'SIGKILL', { group: true });
  });

  const started = Date.now();
  const phaseTimes: string[] = [];
  let escapeLines: string[] = [];
  const escapePhase: [string, () => Promise<void>] = [
    'escape patterns',
    async () => {
      escapeLines = await runEscapePatterns({
        peers: CONTENDERS.filter((contender) => contender !== pidfenceContender),
        graceMs: GRACE_MS,
        survivorCheckMs: SURVIVOR_CHECK_MS,
        trials: N.escapes,
      });
    },
  ];
  for (const [name, run] of ESCAPES_ONLY ? [escapePhase] : [...safetyPhases(), escapePhase]) {
    const phaseStart = Date.now();
    await run();
    phaseTimes.push(`${name} ${((Date.now() - phaseStart) / 1000).toFixed(1)} s`);
  }
  const leftovers = await finalSweep();

  if (!ESCAPES_ONLY) printSafetyTable();
  console.log(`\n${escapeLines.join('\n')}\n`);
  console.log(
    `job-group processes left at the end: ${leftovers} (before the final sweep; after it: ${[...jobGroups].reduce((sum, pgid) => sum + groupMembers(pgid).length, 0)})`,
  );
  console.log(`phase times: ${phaseTimes.join(', ')}; total run time ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

function safetyPhases(): Array<[string, () => Promise<void>]> {
  compileFixture();
  return [
    [SCENARIO.stale, runStale],
    [SCENARIO.storm, runStorm],
    [SCENARIO.stopped, runStopped],
    [SCENARIO.ignoring, runIgnoring],
    [SCENARIO.memberIgnoring, runMemberIgnoring],
  ];
}

function printSafetyTable(): void {
  console.log(`\n${table()}\n`);
  console.log('pidfence outcomes per scenario:\n');
  for (const [scenario, counts] of pidfenceResults) {
    console.log(`- ${scenario}: ${[...counts].map(([result, times]) => `${result} ${times}`).join(', ')}`);
  }
  console.log(`\npidfence trials that left group processes alive: ${pidfenceSurvivors.length === 0 ? 'none' : ''}`);
  for (const line of pidfenceSurvivors) console.log(`- ${line}`);
  console.log(
    `\nstale PID: ${staleMisses} forced reuses were taken by another process first, ${staleOtherTick} meant to be same-tick crossed a tick; all were re-run before any contender acted (nothing signalled in those)`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
