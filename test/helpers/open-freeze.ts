// A preload (`node --require`) that stops a real process at one file-system step, for a test that
// kills it there (docs/decisions/0360): the first fs.openSync whose path matches
// PIDFENCE_TEST_FREEZE_OPEN creates PIDFENCE_TEST_FREEZE_MARKER, then blocks the whole process for
// good (Atomics.wait on the main thread: no timer, callback or request runs), before the file is
// opened. The test sees the marker and ends the process with a verified SIGKILL.
import fs from 'node:fs';

const pattern = process.env.PIDFENCE_TEST_FREEZE_OPEN;
const marker = process.env.PIDFENCE_TEST_FREEZE_MARKER;

if (pattern !== undefined && marker !== undefined) {
  const step = new RegExp(pattern);
  const openSync = fs.openSync.bind(fs);
  let frozen = false;
  fs.openSync = ((file: fs.PathLike, ...rest: unknown[]) => {
    if (!frozen && step.test(String(file))) {
      frozen = true;
      fs.writeFileSync(marker, '');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    }
    return (openSync as (...args: unknown[]) => number)(file, ...rest);
  }) as typeof fs.openSync;
}
