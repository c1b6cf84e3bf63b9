// What one child's exit costs the process that spawned it, by how many children it has (issue 29:
// a worker host's CPU in the project cancel). Node's child processes are reaped by libuv, which on
// each SIGCHLD asks every child it spawned whether it exited, so the calls grow with the children
// still running; this measures whether the CPU does. Not a test. Each round spawns N `sleep`s through
// the production spawn (spawnGroupLeader, as the launchers are spawned), lets them end one by one
// over SPREAD_MS (as a mass stop ends them), and reads this process's CPU across the exits; the
// median of ROUNDS rounds per N.
// Run: npm run bench:reaping
import { spawnGroupLeader } from '../lib/process/index';
import { machineHeader } from './lib/machine';
import { renderGrid } from './lib/table';

const COUNTS = [10, 50, 100, 500, 1_000];
const SPREAD_MS = 4_000;
/** Every child is running before the first one ends. */
const START_MS = 1_500;
const ROUNDS = 3;

async function round(children: number): Promise<{ cpuMs: number; perExitUs: number }> {
  const spawned = Array.from({ length: children }, (_, i) =>
    spawnGroupLeader('/bin/sleep', [((START_MS + (SPREAD_MS * i) / children) / 1000).toFixed(3)], { stdio: 'ignore' }),
  );
  await new Promise((resolve) => setTimeout(resolve, START_MS - 200));
  const before = process.cpuUsage();
  await Promise.all(spawned.map((child) => child.exit));
  const used = process.cpuUsage(before);
  const cpuUs = used.user + used.system;
  return { cpuMs: cpuUs / 1000, perExitUs: cpuUs / children };
}

async function main(): Promise<void> {
  console.log("## Child reaping: one exit's cost to its parent, by the number of children");
  console.log('');
  console.log(
    machineHeader([
      `command: npm run bench:reaping`,
      `exits spread over ${SPREAD_MS / 1000} s, median of ${ROUNDS} rounds`,
    ]),
  );
  console.log('');
  const rows: string[][] = [];
  let base: number | null = null;
  for (const children of COUNTS) {
    const rounds: Array<{ cpuMs: number; perExitUs: number }> = [];
    for (let i = 0; i < ROUNDS; i++) rounds.push(await round(children));
    rounds.sort((a, b) => a.perExitUs - b.perExitUs);
    const { cpuMs, perExitUs } = rounds[Math.floor(ROUNDS / 2)] as (typeof rounds)[number];
    base ??= perExitUs;
    rows.push([String(children), cpuMs.toFixed(0), perExitUs.toFixed(0), `${(perExitUs / base).toFixed(1)}x`]);
  }
  console.log(
    renderGrid(
      ['children', "parent's CPU for all exits, ms", 'per exit, µs', `per exit vs ${COUNTS[0]} children`],
      rows,
      [true, true, true, true],
    ),
  );
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
