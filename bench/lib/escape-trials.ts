// The stop-safety bench's "escape patterns" family (issue 27, docs/decisions/0180): a job that
// leaves a process behind outside its group or its parentage (test/helpers/escape-patterns.ts),
// stopped by each peer (given the job leader's PID, as they would be) and by pidfence twice: in
// group containment and in cgroup containment, both launched by the production launcher.
// Survivors are the processes carrying the job's environment mark still alive after the stop.
// The bench's own cleanup is verified only: captureIdentity + signalVerified on each marked
// process, and cgroup.kill of the throw-away subtree.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';

import { launchAttempt, type Launched } from '../../lib/execution/index';
import { ensureReceiptDirectory } from '../../lib/execution/receipts';
import { LocalProcessController, spawnGroupLeader } from '../../lib/process/index';
import { cgroup2Mount, forgetCgroupSubtree } from '../../lib/process/job-cgroup';
import { removeCgroupTree } from '../../test/helpers/cgroup';
import { ESCAPES, type EscapePattern } from '../../test/helpers/escape-patterns';
import { killMarked, MARK_ENV, markedProcesses, uniqueMark } from '../../test/helpers/marked-processes';
import { renderGrid } from './table';

export interface EscapeTarget {
  readonly pid: number;
  readonly handle: string;
}

export interface EscapeContender {
  readonly name: string;
  stop(target: EscapeTarget): Promise<void>;
}

export interface EscapeSettings {
  /** The peers (tree-kill, ps-tree, pm2-style): each gets the job leader's PID. */
  readonly peers: readonly EscapeContender[];
  /** TERM grace for pidfence's stop and its launcher's leftovers: the peers' escalation grace. */
  readonly graceMs: number;
  /** How long after the stop returned the survivors are counted. */
  readonly survivorCheckMs: number;
  readonly trials: number;
}

const TOKEN = 'E'.repeat(43);
/** How long a pattern may take to have all its processes running. */
const RUNNING_TIMEOUT_MS = 15_000;
/** pidfence's launcher ends after the job tree; a bound so a stuck launcher is a finding, not a hang. */
const LAUNCHER_EXIT_BOUND_MS = 10_000;

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function installed(program: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' }).status === 0;
}

async function untilRunning(mark: string, least: number): Promise<void> {
  const started = Date.now();
  while (markedProcesses(mark).length < least) {
    if (Date.now() - started > RUNNING_TIMEOUT_MS) throw new Error('bench: an escape pattern did not start');
    await delay(20);
  }
}

/** One way of starting and stopping a marked job; `stop` resolves when the stop returned. */
interface EscapeColumn {
  readonly name: string;
  run(script: string, mark: string, least: number): Promise<() => Promise<void>>;
}

function peerColumn(peer: EscapeContender): EscapeColumn {
  return {
    name: peer.name,
    run: async (script, mark, least) => {
      const spawned = spawnGroupLeader('sh', ['-c', script], {
        stdio: 'ignore',
        env: { ...process.env, [MARK_ENV]: mark },
      });
      if (spawned.identity === null || spawned.handle === null) throw new Error('bench: a job was not captured');
      const target = { pid: spawned.identity.pid, handle: spawned.handle };
      await untilRunning(mark, least);
      return () => peer.stop(target);
    },
  };
}

/** The production launcher into `cgroupSubtree` (null: group containment), stopped by LocalProcessController. */
function pidfenceColumn(name: string, settings: EscapeSettings, subtree: () => string | null): EscapeColumn {
  return {
    name,
    run: async (script, mark, least) => {
      const cgroupSubtree = subtree();
      const receipts = fs.mkdtempSync(path.join(os.tmpdir(), 'pidfence-bench-escape-'));
      ensureReceiptDirectory(receipts);
      const launched = launchAttempt({
        receiptDirectory: receipts,
        runId: 'run-escape',
        attemptId: `${mark.replace(/[^A-Za-z0-9-]/g, '')}-a1`,
        token: TOKEN,
        command: 'sh',
        args: ['-c', script],
        env: { ...process.env, [MARK_ENV]: mark, TMPDIR: receipts }, // the daemons' sockets, removed with it
        cgroupSubtree,
        leftoverGraceMs: settings.graceMs,
      });
      if (launched.pid === null || launched.handle === null) throw new Error('bench: the launcher was not captured');
      await untilRunning(mark, least);
      return async () => {
        await stopLaunched(launched, cgroupSubtree, settings.graceMs);
        fs.rmSync(receipts, { recursive: true, force: true });
      };
    },
  };
}

/** requestTermination as a worker calls it, then the launcher's own end (it ends after the job tree). */
async function stopLaunched(launched: Launched, cgroupSubtree: string | null, graceMs: number): Promise<void> {
  process.env.PIDFENCE_CGROUP = cgroupSubtree ?? 'off';
  forgetCgroupSubtree();
  await new LocalProcessController().requestTermination({
    attemptPid: launched.pid ?? 0,
    handle: launched.handle ?? '',
    graceMs,
  });
  await Promise.race([launched.exited, delay(LAUNCHER_EXIT_BOUND_MS)]);
}

interface Tally {
  survivors: number;
  trialsWithSurvivors: number;
  trials: number;
}

/** Starts the pattern, stops it, counts the marked survivors, and kills them (verified path). */
async function escapeTrial(column: EscapeColumn, pattern: EscapePattern, tally: Tally, checkMs: number): Promise<void> {
  const [, script, least] = pattern;
  const mark = uniqueMark('escape');
  try {
    const stop = await column.run(script, mark, least);
    await stop();
    await delay(checkMs);
    const survivors = markedProcesses(mark).length;
    tally.trials += 1;
    tally.survivors += survivors;
    if (survivors > 0) tally.trialsWithSurvivors += 1;
  } finally {
    await killMarked(mark);
  }
}

function makeSubtree(made: string[]): string {
  const mount = cgroup2Mount();
  if (mount === null) throw new Error('bench: no cgroup2 mount');
  const subtree = path.join(mount, `pidfence-bench-escape-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  fs.mkdirSync(subtree);
  made.push(subtree);
  return subtree;
}

/** Runs every pattern whose program is installed; returns the table and the lines under it. */
export async function runEscapePatterns(settings: EscapeSettings): Promise<string[]> {
  const subtrees: string[] = [];
  const columns: EscapeColumn[] = [
    ...settings.peers.map(peerColumn),
    pidfenceColumn('pidfence (group)', settings, () => null),
    pidfenceColumn('pidfence (cgroup)', settings, () => makeSubtree(subtrees)),
  ];
  const tallies = new Map<string, Tally>();
  const skipped: string[] = [];
  try {
    for (const pattern of ESCAPES) {
      const program = pattern[3];
      if (program !== null && !installed(program)) {
        skipped.push(pattern[0]);
        continue;
      }
      for (let round = 0; round < settings.trials; round += 1) {
        for (let k = 0; k < columns.length; k += 1) {
          const column = columns[(k + round) % columns.length];
          if (column === undefined) continue;
          const key = `${pattern[0]}\u0000${column.name}`;
          const tally = tallies.get(key) ?? { survivors: 0, trialsWithSurvivors: 0, trials: 0 };
          tallies.set(key, tally);
          await escapeTrial(column, pattern, tally, settings.survivorCheckMs);
        }
      }
    }
  } finally {
    for (const subtree of subtrees) await removeCgroupTree(subtree);
    delete process.env.PIDFENCE_CGROUP;
    forgetCgroupSubtree();
  }
  return escapeTable(columns, tallies, skipped, settings);
}

function escapeTable(
  columns: readonly EscapeColumn[],
  tallies: ReadonlyMap<string, Tally>,
  skipped: readonly string[],
  settings: EscapeSettings,
): string[] {
  const header = ['escape pattern', ...columns.map((column) => column.name)];
  const body = ESCAPES.filter((pattern) => !skipped.includes(pattern[0])).map((pattern) => [
    `${pattern[0]}${pattern[3] === null ? '' : ` (${pattern[3]} installed)`}`,
    ...columns.map((column) => {
      const tally = tallies.get(`${pattern[0]}\u0000${column.name}`);
      return tally === undefined ? 'n/a' : `${tally.survivors} (${tally.trialsWithSurvivors} / ${tally.trials})`;
    }),
  ]);
  return [
    `escape patterns (N=${settings.trials} each): survivors summed over the trials (trials with survivors / trials); a survivor is a process carrying the job's environment mark still alive ${settings.survivorCheckMs} ms after the stop returned (for pidfence also after its launcher ended)`,
    '',
    renderGrid(header, body, [false, ...columns.map(() => true)]),
    '',
    `escape patterns skipped (program not installed): ${skipped.length === 0 ? 'none' : skipped.join(', ')}`,
  ];
}
