// The SQLite store's time authority (design/dispatch §2.2): an injected clock, Date.now by default.
// Its reading is validated so a broken clock fails loudly instead of writing nonsense deadlines.
import { PidfenceError } from '../../base/errors';
import { EPOCH_MS_MAX } from '../../contract/index';

export type Clock = () => number;

export function readClock(clock: Clock): number {
  const now = clock();
  if (!Number.isInteger(now) || now < 0 || now > EPOCH_MS_MAX) {
    throw new PidfenceError('the store clock returned something other than integer epoch milliseconds; inject a clock like () => Date.now().', 'ERR_PIDFENCE_BAD_CLOCK');
  }
  return now;
}
