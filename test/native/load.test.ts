// The addon loads on this machine and reports what the kernel offers. Nothing in the mission
// may skip here, so a missing feature is a failure, not a skip.
import test from 'ava';

import { addonStatus, buildInfo, capabilities } from '../../lib/native/index';

test('the addon loads and is built from the current native sources', (t) => {
  const status = addonStatus();
  t.true(status.loaded, JSON.stringify(status));
  if (status.loaded) t.false(status.stale, 'rebuild: npm run build:native (or npm run prebuilds:all)');
  t.regex(buildInfo().sourceDigest, /^[0-9a-f]{64}$/);
});

test('this kernel offers pidfd, the group flag and pidfs identity', (t) => {
  const caps = capabilities();
  t.true(caps.pidfdOpen);
  t.true(caps.pidfdSendSignal);
  t.true(caps.processGroupFlag);
  t.true(caps.pidfsIdentity);
  t.is(caps.groupSignalMode, 'pidfd-process-group');
});
