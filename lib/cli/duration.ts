// Durations on the command line: `500ms`, `30s`, `5m`, `2h`, or a bare number of seconds. A bound
// is reported in seconds, the unit people type (docs/decisions/0042).
import { PidfenceRangeError } from '../base/errors';
import { secondsText } from '../base/time';

const DURATION = /^(\d{1,9})(ms|s|m|h)?$/;

/** How every duration option's help says what it takes (a bare number is seconds, as for timeout(1)). */
export const DURATION_HELP = '500ms, 30s, 5m, 2h; a number alone is seconds';
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

export function parseDuration(text: string, what: string): number {
  const match = DURATION.exec(text.trim());
  if (match === null)
    throw new PidfenceRangeError(
      `${what} must be a duration such as 500ms, 30s, 5m or 2h (a number alone is seconds).`,
      'ERR_PIDFENCE_INVALID_DURATION',
    );
  const ms = Number(match[1]) * (UNIT_MS[match[2] ?? 's'] ?? 1_000);
  if (!Number.isSafeInteger(ms) || ms < 1)
    throw new PidfenceRangeError(`${what} must be at least 1ms.`, 'ERR_PIDFENCE_INVALID_DURATION');
  return ms;
}

/** A duration in any unit, refused above `maxMs` with the cap in seconds (e.g. --grace 2m over a 30 s cap). */
export function parseDurationWithin(text: string, what: string, maxMs: number, minMs = 1): number {
  const ms = parseDuration(text, what);
  if (ms > maxMs || ms < minMs) {
    throw new PidfenceRangeError(
      `${what} must be from ${secondsText(minMs)} to ${secondsText(maxMs)}; you gave ${text.trim()} (${secondsText(ms)}).`,
      'ERR_PIDFENCE_INVALID_DURATION',
    );
  }
  return ms;
}
