// The cgroup test files' gate: AVA is imported here, not in helpers/cgroup.ts, which benchmarks
// import too (AVA refuses to load outside a test run).
import test from 'ava';

import { cgroupUnavailable } from './cgroup';

/**
 * `test.serial` where cgroup tests can run (root and a writable cgroup2 mount); elsewhere `test.skip`,
 * with one test of the file that says loudly why (`what`: the file's tests, as the skip names them).
 */
export function cgroupTestOrSkip(what: string): typeof test.serial | typeof test.skip {
  const skip = cgroupUnavailable();
  if (skip === null) return test.serial;
  test(`${what} tests are skipped`, (t) => {
    t.log(`SKIPPED LOUDLY: ${skip}`);
    t.pass();
  });
  return test.skip;
}
