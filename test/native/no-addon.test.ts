// Without the addon (forced by PIDFENCE_NO_ADDON=1) the package still imports, and every
// signalling call answers `unsupported`; nothing falls back to process.kill.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

import test from 'ava';

import { spawnJob } from '../helpers/processes';

const packageEntry = path.resolve(__dirname, '..', '..', 'lib', 'index.js');

test('with PIDFENCE_NO_ADDON=1 the package imports and signalling answers unsupported', (t) => {
  const job = spawnJob(t, 'sleep', ['3600']);
  const script = `
    const { native } = require(${JSON.stringify(packageEntry)});
    const identity = ${JSON.stringify(job.identity)};
    // Any bare-PID fallback would go through process.kill: make it loud.
    process.kill = () => { throw new Error('process.kill was called'); };
    const out = {
      status: native.addonStatus(),
      caps: native.capabilities(),
      signal: native.signalVerified(identity, 'SIGKILL', { group: true }),
    };
    native.waitExit(identity, 10).then((wait) => {
      let capture;
      try { native.captureIdentity(identity.pid); } catch (error) { capture = error.code; }
      process.stdout.write(JSON.stringify({ ...out, wait, capture }));
    });
  `;
  const result = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, PIDFENCE_NO_ADDON: '1' },
    encoding: 'utf8',
  });
  t.is(result.status, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  t.deepEqual(out.status, { loaded: false, reason: 'disabled by PIDFENCE_NO_ADDON=1' });
  t.is(out.caps.groupSignalMode, 'unsupported');
  t.false(out.caps.pidfdOpen);
  t.is(out.signal.kind, 'unsupported');
  t.is(out.wait.kind, 'unsupported');
  t.is(out.capture, 'ERR_PIDFENCE_UNSUPPORTED');
  // The job was not touched.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a file found by a path computed at run time
  t.is(require('../../lib/native/index').signalVerified(job.identity, 0, { group: true }).kind, 'signalled');
});
