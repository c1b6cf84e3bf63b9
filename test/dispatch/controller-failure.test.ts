// Issue 15 item 3: a controller failure inside a dispatch (EPERM, say) is not a failed cycle — the
// dispatch settles dispatch_error and backs off — but it reaches the runner's rate-limited
// diagnostics with its code and errno, never its text. Through the real Dispatcher, Supervisor and
// LifecycleRunner on every store; and with the real controller and a real EPERM from the kernel.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { PidfenceError } from '../../lib/base/errors';
import { LifecycleRunner, Supervisor, type DiagnosticRecord } from '../../lib/dispatch/index';
import { signalVerified } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { NO_PASSWD_UID, requireRoot } from '../cli/pidfence-process';
import { delay } from '../helpers/wait';
import { storeFactories } from '../helpers/stores';
import { SECRET_TEXT, ThrowingController, cancelledRunFor, dispatcherFor, startJob } from './world';

for (const factory of storeFactories) {
  test(`a controller that throws a typed failure (EPERM) reaches the lifecycle runner's diagnostics with its code and errno, and the dispatch backs off [${factory.name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    const target = await cancelledRunFor(store, job);
    const controller = new ThrowingController(
      new PidfenceError(SECRET_TEXT, 'ERR_PIDFENCE_SIGNAL_FAILED', { errno: 'EPERM' }),
    );
    const records: DiagnosticRecord[] = [];
    const runner = new LifecycleRunner({
      supervisor: new Supervisor({ repository: store.repository, dispatcher: dispatcherFor(store, [controller]) }),
      cadenceMs: 100,
      diagnostics: (record) => records.push(record),
    });
    runner.start();
    for (let waited = 0; records.length === 0 && waited < 10_000; waited += 20) await delay(20);
    await runner.stop();
    t.deepEqual(records[0], { code: 'ERR_PIDFENCE_SIGNAL_FAILED', count: 1, errno: 'EPERM' });
    t.false(JSON.stringify(records).includes(SECRET_TEXT.slice(0, 6)), 'never the error text');
    t.like(await store.repository.getRecord(target.runId), { status: 'retry_wait', lastResult: 'dispatch_error' });
    t.is(signalVerified(job.identity, 0, { group: true }).kind, 'signalled', 'the job still lives');
  });
}

test("a real EPERM: a dispatcher under another uid than its job gets the kernel's refusal, reported as ERR_PIDFENCE_SIGNAL_FAILED with errno EPERM [sqlite]", async (t) => {
  requireRoot('run the dispatcher under another uid than its job');
  // The job belongs to root (this process); the dispatcher runs as an unprivileged uid, which may
  // open the job's pidfd and read its /proc stat, but not signal it: pidfd_send_signal answers EPERM.
  const dir = mkdtempSync(path.join(tmpdir(), 'pidfence-eperm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o777);
  const file = path.join(dir, 'pidfence.db');
  const store = openSqliteStore(file);
  const job = startJob(t);
  const target = await cancelledRunFor(store, job);
  store.close();
  chmodSync(file, 0o666);
  const child = await new Promise<string>((resolve) => {
    execFile(
      process.execPath,
      [path.join(__dirname, 'eperm-dispatcher-child.js'), file],
      { uid: NO_PASSWD_UID, gid: NO_PASSWD_UID, timeout: 30_000 },
      (_error, stdout) => resolve(stdout),
    );
  });
  const report = JSON.parse(child) as { uid?: number; records?: DiagnosticRecord[]; error?: string };
  t.is(report.uid, NO_PASSWD_UID, child);
  t.deepEqual(report.records?.[0], { code: 'ERR_PIDFENCE_SIGNAL_FAILED', count: 1, errno: 'EPERM' });
  const after = openSqliteStore(file, { migrate: false });
  t.teardown(() => after.close());
  t.like(await after.dispatchRepository.getRecord(target.runId), {
    status: 'retry_wait',
    lastResult: 'dispatch_error',
  });
  t.is(signalVerified(job.identity, 0, { group: true }).kind, 'signalled', 'the job was not stopped');
});
