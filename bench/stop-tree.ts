// Stop-to-empty of a job's whole tree (issue 27; docs/decisions/0180). Not a test. Side by side in
// one run, SIGKILL to every process of a tree of 1, 10 and 100 processes, a fork storm, and a tree
// whose 10 children each left the group with setsid:
//   cgroup: cgroup.kill, then `populated 0` told by inotify on cgroup.events (lib/native/job-cgroup);
//   group:  pidfence's held pidfd, PIDFD_SIGNAL_PROCESS_GROUP, then signal 0 until the group is empty;
//   killpg: the peer baseline, kill(-pgid, SIGKILL) then kill(-pgid, 0) until ESRCH — a bare group
//           signal, allowed here only, as the baseline it is.
// Every tree runs inside a throw-away cgroup for all three paths, so survivors are counted from its
// cgroup.procs one settle later and removed by cgroup.kill afterwards. Run as root with cgroup2
// mounted: npm run bench:stop-tree (PIDFENCE_BENCH_TREE_TRIALS, default 15).
import * as fs from 'node:fs';
import * as path from 'node:path';

import { acquireGroupHold, cgroupKill, cgroupWaitEmpty, captureIdentity, type JobCgroupRef } from '../lib/native/index';
import { cgroup2Mount } from '../lib/process/job-cgroup';
import { spawnGroupLeader } from '../lib/process/index';
import { printSignallingHeader } from './lib/machine';
import { quantile } from './lib/stats';
import { renderGrid, renderTargets, type Target } from './lib/table';

const TRIALS = Number(process.env.PIDFENCE_BENCH_TREE_TRIALS ?? 15);
const SETTLE_MS = 200;
const STORM_WARMUP_MS = 200;
/** The target: the cgroup path within 1.1x of the pidfd group path at 100 processes. */
const TARGET_AT_100 = 1.1;

type Path = 'cgroup' | 'group' | 'killpg';
const PATHS: readonly Path[] = ['cgroup', 'group', 'killpg'];

interface Scenario {
  readonly name: string;
  readonly script: string;
  /** Processes to wait for before the stop (the storm: none, it is started and left to run). */
  readonly ready: number;
}

const sleepTree = (n: number): string =>
  `i=0; while [ $i -lt ${n - 1} ]; do sleep 1000 & i=$((i+1)); done; exec sleep 1000`;
const SCENARIOS: readonly Scenario[] = [
  { name: '1 process', script: 'exec sleep 1000', ready: 1 },
  { name: '10 processes', script: sleepTree(10), ready: 10 },
  { name: '100 processes', script: sleepTree(100), ready: 100 },
  { name: 'fork storm', script: 'while :; do sleep 1000 & done', ready: 0 },
  {
    name: '10 setsid children',
    script: 'i=0; while [ $i -lt 10 ]; do setsid sleep 1000 & i=$((i+1)); done; exec sleep 1000',
    ready: 11,
  },
];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const members = (dir: string): number =>
  fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).length;

async function clear(dir: string): Promise<void> {
  const ref = { subtree: path.dirname(dir), id: fs.statSync(dir, { bigint: true }).ino.toString() };
  cgroupKill(ref);
  await cgroupWaitEmpty(ref, 10_000);
  fs.rmdirSync(dir);
}

/** One stop by `how`; resolves with the milliseconds from the KILL to "empty" as that path sees it. */
async function stopBy(how: Path, ref: JobCgroupRef, pgid: number): Promise<number> {
  const started = performance.now();
  if (how === 'cgroup') {
    cgroupKill(ref);
    await cgroupWaitEmpty(ref, 10_000);
    return performance.now() - started;
  }
  if (how === 'killpg') {
    process.kill(-pgid, 'SIGKILL'); // the peer baseline's bare group signal
    for (;;) {
      try {
        process.kill(-pgid, 0);
      } catch {
        return performance.now() - started;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  throw new Error('group stops go through stopByGroup');
}

async function trial(
  subtree: string,
  scenario: Scenario,
  how: Path,
  index: number,
): Promise<{ ms: number; survivors: number }> {
  const dir = path.join(subtree, `${how}-${index}`);
  fs.mkdirSync(dir);
  const ref = { subtree, id: fs.statSync(dir, { bigint: true }).ino.toString() };
  const job = spawnGroupLeader('sh', ['-c', `echo 0 > ${dir}/cgroup.procs && ${scenario.script}`], { stdio: 'ignore' });
  const pgid = job.identity?.pid ?? 0;
  const hold = how === 'group' && job.identity !== null ? acquireGroupHold(job.identity) : null;
  if (scenario.ready === 0) await sleep(STORM_WARMUP_MS);
  while (scenario.ready > 0 && members(dir) < scenario.ready) await sleep(5);
  let ms: number;
  if (hold !== null && hold.kind === 'held') {
    const started = performance.now();
    hold.hold.signalGroup('SIGKILL');
    while (hold.hold.signalGroup(0).kind === 'signalled') await new Promise((resolve) => setImmediate(resolve));
    ms = performance.now() - started;
    hold.hold.release();
  } else {
    ms = await stopBy(how, ref, pgid);
  }
  await job.exit;
  await sleep(SETTLE_MS);
  const survivors = members(dir);
  await clear(dir);
  return { ms, survivors };
}

async function main(): Promise<void> {
  const mount = cgroup2Mount();
  if (process.getuid?.() !== 0 || mount === null || captureIdentity(process.pid) === null)
    throw new Error('run as root with cgroup2 mounted');
  const subtree = path.join(mount, `pidfence-bench-${process.pid}`);
  fs.mkdirSync(subtree);
  printSignallingHeader(
    'Stop-to-empty of a whole tree: cgroup vs pidfd group vs killpg',
    `${TRIALS} trials per cell (interleaved), SIGKILL to every process, median and p90 ms from the KILL to "empty" as each path sees it, survivors counted ${SETTLE_MS} ms later`,
  );
  const medians = new Map<string, number>();
  const rows: string[][] = [];
  try {
    for (const scenario of SCENARIOS) {
      const samples = new Map<Path, number[]>(PATHS.map((how) => [how, []]));
      const survivors = new Map<Path, number>(PATHS.map((how) => [how, 0]));
      for (let index = 0; index < TRIALS; index++) {
        for (const how of PATHS) {
          const result = await trial(subtree, scenario, how, index);
          samples.get(how)?.push(result.ms);
          survivors.set(how, Math.max(survivors.get(how) ?? 0, result.survivors));
        }
      }
      for (const how of PATHS) {
        const ms = samples.get(how) ?? [];
        medians.set(`${scenario.name}/${how}`, quantile(ms, 0.5));
        rows.push([
          scenario.name,
          how,
          quantile(ms, 0.5).toFixed(2),
          quantile(ms, 0.9).toFixed(2),
          String(survivors.get(how)),
        ]);
      }
    }
  } finally {
    fs.rmdirSync(subtree);
  }
  console.log(
    `\n${renderGrid(['tree', 'path', 'median ms', 'p90 ms', 'most survivors'], rows, [false, false, true, true, true])}\n`,
  );
  const ratio = (medians.get('100 processes/cgroup') ?? 0) / (medians.get('100 processes/group') ?? 1);
  const targets: Target[] = [
    {
      name: 'cgroup vs pidfd group, 100 processes',
      ratio,
      op: '<=',
      limit: TARGET_AT_100,
      detail: 'median cgroup.kill → populated 0 / median group SIGKILL → group empty',
    },
  ];
  console.log(renderTargets(targets));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
