// spawnGroupLeader: a new group leader, its handle captured in the spawn tick, no command or
// environment in the handle.
import test from 'ava';

import { readProcessStat, signalVerified, waitExit } from '../../lib/native/index';
import { handleExpectedIdentity, parseHandle, spawnGroupLeader } from '../../lib/process/index';

test('spawnGroupLeader starts a group leader and captures its durable handle', async (t) => {
  const job = spawnGroupLeader('sleep', ['3600'], { stdio: 'ignore', env: { SECRET_TOKEN: 'hunter2' } });
  t.is(job.handleStatus, 'captured');
  const handle = parseHandle(job.handle);
  const expected = handleExpectedIdentity(handle);
  t.teardown(async () => {
    signalVerified(expected, 'SIGKILL', { group: true });
    await job.exit;
  });
  const stat = readProcessStat(handle.pid);
  t.true(handle.pid === job.child.pid);
  t.is(handle.pgid, handle.pid);
  t.is(stat?.pgid, handle.pid);
  t.is(stat?.sid, handle.pid, 'a new session, so its group can never change');
  t.is(stat?.startTicks, handle.startTicks);
  t.truthy(handle.pidfsIno);
  for (const secret of ['sleep', '30', 'SECRET_TOKEN', 'hunter2'])
    t.false(job.handle!.includes(`"${secret}"`) || job.handle!.includes(secret + ' '));
  t.deepEqual(Object.keys(JSON.parse(job.handle!)), [
    'v',
    'platform',
    'bootId',
    'pid',
    'startTicks',
    'pgid',
    'pidfsIno',
    'pidNs',
  ]);
});

test('the exit promise resolves with the exit status', async (t) => {
  const job = spawnGroupLeader('sh', ['-c', 'exit 7'], { stdio: 'ignore' });
  t.deepEqual(await job.exit, { code: 7, signal: null });
});

test('a command that cannot start has no handle and a settled exit', async (t) => {
  const job = spawnGroupLeader('/nonexistent/pidfence-no-such-binary', [], { stdio: 'ignore' });
  t.is(job.handle, null);
  t.is(job.handleStatus, 'exited_before_capture');
  t.deepEqual(await job.exit, { code: null, signal: null });
});

test('the handle proves the running job and waitExit sees its end', async (t) => {
  const job = spawnGroupLeader('sleep', ['3600'], { stdio: 'ignore' });
  const expected = handleExpectedIdentity(parseHandle(job.handle));
  const exited = waitExit(expected, 5000);
  t.is(signalVerified(expected, 'SIGTERM', { group: true }).kind, 'signalled');
  t.deepEqual(await exited, { kind: 'exited' });
  t.deepEqual(await job.exit, { code: null, signal: 'SIGTERM' });
});

test('spawn options Node would act on by a bare PID (timeout, killSignal, signal) or with a shell are refused, with nothing started', (t) => {
  for (const key of ['timeout', 'killSignal', 'signal', 'shell', 'detached']) {
    const options = { stdio: 'ignore', [key]: key === 'timeout' ? 10 : true } as unknown as Parameters<
      typeof spawnGroupLeader
    >[2];
    const error = t.throws(() => spawnGroupLeader('/nonexistent/pidfence-must-not-start', [], options), {
      code: 'ERR_PIDFENCE_INVALID_OPTIONS',
    });
    t.true(error?.message.includes(`not ${key}`), error?.message);
  }
  t.throws(() => spawnGroupLeader('true', [], 'inherit' as unknown as Parameters<typeof spawnGroupLeader>[2]), {
    code: 'ERR_PIDFENCE_INVALID_OPTIONS',
  });
});
