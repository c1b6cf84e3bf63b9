// Finding a job cgroup again by its id (docs/decisions/0420): the name an earlier find gave is tried
// first and proved by the id, so looking at a job among thousands of sibling cgroups does not list
// the subtree each time. Counted from the kernel's side: getdents64 calls on the subtree, under
// strace, in a real process doing real reads of a real cgroup.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { cgroupLearnName, cgroupRead } from '../../lib/native/index';
import { makeCgroup, testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';

const cgroupTest = cgroupTestOrSkip('job cgroup lookup');

const NATIVE = path.resolve(__dirname, '..', '..', 'lib', 'native', 'index.js');
const PROCESS = path.resolve(__dirname, '..', '..', 'lib', 'process', 'job-cgroup.js');
const SIBLINGS = 600;
const READS = 50;
const JOBS = 200;

/**
 * `rounds` cgroupRead calls of each id in a new node process under strace; its getdents64 calls on
 * `subtree`. `before` runs first in that process (`n` is lib/native, `p` lib/process).
 */
function listingsDuringReads(
  subtree: string,
  ids: readonly string[],
  rounds: number,
  afterFirstRound = '',
  before = '',
): { kinds: string[]; listings: number } {
  const log = path.join(tmpdir(), `pidfence-lookup-${process.pid}-${Date.now()}.strace`);
  const script = `const n = require(${JSON.stringify(NATIVE)}); const p = require(${JSON.stringify(PROCESS)}); const kinds = [];
${before}
for (let r = 0; r < ${rounds}; r++) {
  for (const id of ${JSON.stringify(ids)}) kinds.push(n.cgroupRead({ subtree: ${JSON.stringify(subtree)}, id }).kind);
  if (r === 0) { ${afterFirstRound} }
}
console.log(JSON.stringify(kinds));`;
  const run = spawnSync(
    'strace',
    ['-f', '-qq', '-y', '-e', 'trace=getdents64', '-o', log, process.execPath, '-e', script],
    { encoding: 'utf8', timeout: 60_000 },
  );
  try {
    if (run.status !== 0) throw new Error(`the traced reader failed: ${run.stderr}`);
    const listings = readFileSync(log, 'utf8')
      .split('\n')
      .filter((line) => line.includes(`getdents64(`) && line.includes(`<${subtree}>`)).length;
    return { kinds: JSON.parse(run.stdout) as string[], listings };
  } finally {
    rmSync(log, { force: true });
  }
}

cgroupTest(
  `job cgroup lookup: ${READS} reads of one job cgroup among ${SIBLINGS} siblings list the subtree once, not once a read`,
  (t) => {
    const subtree = testSubtree(t, 'lookup');
    for (let i = 0; i < SIBLINGS; i++) mkdirSync(path.join(subtree, `sibling-${String(i).padStart(4, '0')}`));
    const { id } = makeCgroup(subtree, 'zz-job');
    const { kinds, listings } = listingsDuringReads(subtree, [id], READS);
    t.deepEqual(new Set(kinds), new Set(['ok']), 'every read found the cgroup');
    // One find lists the whole subtree: a few getdents64 calls (buffers of entries, then the end).
    t.true(listings > 0, 'the first read found it by listing the subtree');
    t.true(listings <= 6, `${listings} getdents64 calls on the subtree for ${READS} reads`);
  },
);

cgroupTest(
  `job cgroup lookup: ${JOBS} job cgroups of one process, each read twice: the second round lists the subtree at most a few times`,
  (t) => {
    const subtree = testSubtree(t, 'lookup-many');
    const ids = Array.from({ length: JOBS }, (_, i) => makeCgroup(subtree, `job-${i}`).id);
    const once = listingsDuringReads(subtree, ids, 1);
    const twice = listingsDuringReads(subtree, ids, 2);
    t.is(twice.kinds.filter((kind) => kind === 'ok').length, 2 * JOBS, 'every read found its cgroup');
    t.true(once.listings >= JOBS, `${once.listings} getdents64 calls: the first round found each by listing`);
    // The second round recalls each remembered name: a few sets may hold more than their 4 slots.
    const secondRound = twice.listings - once.listings;
    t.log(`getdents64 calls: ${once.listings} for one round, ${twice.listings} for two`);
    t.true(secondRound <= 5, `${secondRound} getdents64 calls in the second round of ${JOBS} reads`);
  },
);

cgroupTest(
  `job cgroup lookup: a cgroup removed after it was found answers gone at once, ${READS} times, without listing the subtree`,
  (t) => {
    const subtree = testSubtree(t, 'lookup-removed');
    for (let i = 0; i < SIBLINGS; i++) mkdirSync(path.join(subtree, `sibling-${String(i).padStart(4, '0')}`));
    const { directory, id } = makeCgroup(subtree, 'zz-job');
    // Removed by someone else after the first read, as a launcher removes its emptied cgroup.
    const removal = `require('node:fs').rmdirSync(${JSON.stringify(directory)});`;
    const { kinds, listings } = listingsDuringReads(subtree, [id], READS, removal);
    t.is(kinds[0], 'ok');
    t.deepEqual(new Set(kinds.slice(1)), new Set(['gone']), 'every read after the removal');
    t.true(listings <= 6, `${listings} getdents64 calls on the subtree for ${READS} reads`);
  },
);

cgroupTest(
  `job cgroup lookup: a job cgroup made by this process among ${SIBLINGS} siblings is found by the name it was made under, without listing the subtree (docs/decisions/0443)`,
  (t) => {
    const subtree = testSubtree(t, 'lookup-made');
    for (let i = 0; i < SIBLINGS; i++) mkdirSync(path.join(subtree, `sibling-${String(i).padStart(4, '0')}`));
    // createJobCgroup makes it as an admission does, in the traced process, which then reads it twice.
    const made = `const { ref } = p.createJobCgroup(${JSON.stringify(subtree)}, 'zz-job-a1');
kinds.push(n.cgroupRead(ref).kind, n.cgroupRead(ref).kind);`;
    const { kinds, listings } = listingsDuringReads(subtree, [], 1, '', made);
    t.deepEqual(kinds, ['ok', 'ok'], 'both reads found the cgroup');
    t.is(listings, 0, `${listings} getdents64 calls on the subtree`);
  },
);

cgroupTest(
  'job cgroup lookup: a name learned for a cgroup is proved by its id first; a wrong one is refused and nothing is remembered',
  (t) => {
    const subtree = testSubtree(t, 'lookup-learn');
    const a = makeCgroup(subtree, 'job-a');
    const b = makeCgroup(subtree, 'job-b');
    t.is(cgroupLearnName({ subtree, id: a.id }, 'job-b').kind, 'gone', 'job-b is not the directory of a');
    t.is(cgroupLearnName({ subtree, id: a.id }, 'job-none').kind, 'gone');
    t.is(cgroupRead({ subtree, id: a.id }).kind, 'ok', 'a is still found (by listing), not answered gone');
    t.is(cgroupLearnName({ subtree, id: b.id }, 'job-b').kind, 'ok');
    for (const bad of ['', '.', '..', 'a/b', 'x'.repeat(255)])
      t.throws(() => cgroupLearnName({ subtree, id: a.id }, bad), { code: 'ERR_PIDFENCE_INVALID_CGROUP' } as never);
    t.throws(() => cgroupLearnName({ subtree, id: a.id }, 7 as never), {
      code: 'ERR_PIDFENCE_INVALID_CGROUP',
    } as never);
  },
);
