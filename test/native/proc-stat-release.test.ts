// A task being reaped (docs/decisions/0436). While its reaper releases it, the kernel prints its
// /proc/<pid>/stat with group and session -1. The parser took those lines for malformed, so an
// identity capture or proof racing a reap failed with EPROTO (ERR_PIDFENCE_SYSCALL) instead of
// answering that the process is gone. A test's cleanup hit it (captureIdentity of a job that had
// just ended). test/fixtures/proc-stat-release.cc drives native/proc_stat.cc itself: the kernel's
// lines, and a real race of reads against 2,000 real reaps.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { fixturesDir } from '../helpers/processes';

const NATIVE_DIR = path.resolve(fixturesDir, '..', '..', 'native');

/** test/fixtures/proc-stat-release.cc with native/proc_stat.cc, compiled for this test run. */
function harness(t: ExecutionContext): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-proc-stat-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const binary = path.join(dir, 'proc-stat-release');
  execFileSync('c++', [
    '-std=c++17',
    '-O2',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-I',
    NATIVE_DIR,
    '-o',
    binary,
    path.join(fixturesDir, 'proc-stat-release.cc'),
    path.join(NATIVE_DIR, 'proc_stat.cc'),
  ]);
  return binary;
}

/** A stat line as the kernel writes it, with fields 4-6 and the state given. */
function statLine(state: string, ppid: string, group: string, session: string): string {
  return `4243 (sh) ${state} ${ppid} ${group} ${session} 0 -1 4227148 17 0 0 0 0 0 0 0 20 0 0 0 151802 0 0 18446744073709551615 0 0`;
}

test('proc_stat_parse reads a task being released (state Z or X, group and session -1, as this kernel writes it) and still refuses a negative group anywhere else', (t) => {
  const lines = [
    statLine('X', '0', '-1', '-1'),
    statLine('Z', '0', '-1', '-1'),
    statLine('Z', '1', '4243', '4243'),
    statLine('S', '1', '-1', '-1'),
    statLine('Z', '0', '-1', '4243'),
    statLine('X', '0', '-2', '-1'),
    statLine('R', '-1', '4243', '4243'),
  ];
  const answers = execFileSync(harness(t), ['parse'], { input: `${lines.join('\n')}\n`, encoding: 'utf8' })
    .trim()
    .split('\n');
  t.deepEqual(answers, [
    'accepted X -1 -1',
    'accepted Z -1 -1',
    'accepted Z 4243 4243',
    'refused',
    'refused',
    'refused',
    'refused',
  ]);
});

test('proc_stat_read racing 2,000 real reaps answers ok or gone for every read, never a failure', (t) => {
  const report = execFileSync(harness(t), ['race', '2000'], { encoding: 'utf8', timeout: 120_000 }).trim();
  const counts = Object.fromEntries(
    [...report.matchAll(/(\w+) (-?\d+)/g)].map(([, name, value]) => [name as string, Number(value)]),
  );
  t.log(report);
  t.is(counts.gone, 2000, 'every child was seen gone once reaped');
  t.is(counts.failed, 0, `no read failed (${report})`);
});
