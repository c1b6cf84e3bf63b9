// bootId and captureIdentity: the identity is taken from one pidfd, with the pidfs inode on
// kernels that have pidfs.
import * as fs from 'node:fs';

import test from 'ava';

import { bootId, captureIdentity } from '../../lib/native/index';
import { spawnJob } from '../helpers/processes';

test('bootId is the kernel boot id, read once and stable', (t) => {
  const fromKernel = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  t.is(bootId(), fromKernel);
  t.is(bootId(), bootId());
});

test('captureIdentity returns pid, boot id, start ticks, pgid and the pidfs inode', (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const identity = captureIdentity(job.identity.pid);
  t.truthy(identity);
  t.is(identity?.pid, job.identity.pid);
  t.is(identity?.bootId, bootId());
  t.is(identity?.pgid, job.identity.pid);
  t.regex(identity?.startTicks ?? '', /^[0-9]+$/);
  t.regex(identity?.pidfsIno ?? '', /^[1-9][0-9]*$/);
  t.deepEqual(identity, job.identity, 'the same process captured twice gives the same identity');
});

test('captureIdentity gives different processes different pidfs inodes', (t) => {
  const first = spawnJob(t, 'sleep', ['3600']);
  const second = spawnJob(t, 'sleep', ['3600']);
  t.not(first.identity.pidfsIno, second.identity.pidfsIno);
});

test('captureIdentity returns null for a process that has exited and been reaped', async (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  await job.stop(); // verified SIGKILL, then reaped by Node
  t.is(captureIdentity(job.identity.pid), null);
});
