// A preload (`node --require`) for the start-up signal test (docs/decisions/0162): creates the file
// PIDFENCE_TEST_HOLD_MARKER names at the moment the program adds its first SIGTERM listener (its
// hold of the stop signals). The kernel cannot tell that moment: Node catches SIGINT and SIGTERM
// natively from its own start (to restore the terminal), so SigCgt shows them caught before any
// JavaScript runs. With PIDFENCE_TEST_HOLD_STORE set, the marker says whether that store file
// existed at the hold ("store" or "none"), seen inside the process at that moment: a test that
// looked afterwards would race the start-up it measures on a loaded machine.
import { existsSync, renameSync, writeFileSync } from 'node:fs';

const marker = process.env.PIDFENCE_TEST_HOLD_MARKER;
const store = process.env.PIDFENCE_TEST_HOLD_STORE;

if (marker !== undefined && marker !== '') {
  let marked = false;
  const on = process.on.bind(process);
  process.on = ((event: string | symbol, listener: (...args: unknown[]) => void) => {
    const result = on(event as 'SIGTERM', listener);
    if (event === 'SIGTERM' && !marked) {
      marked = true;
      // Written whole, then renamed: the test that polls for the marker never reads half of it.
      writeFileSync(`${marker}.tmp`, store === undefined || store === '' ? '' : existsSync(store) ? 'store' : 'none');
      renameSync(`${marker}.tmp`, marker);
    }
    return result;
  }) as typeof process.on;
}
