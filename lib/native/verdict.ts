// Decodes the int32 verdict of the native signalVerified (native/addon.cc verdict_pack) into the
// outcome objects callers see. The objects are prebuilt and frozen: decoding allocates nothing.
import { constants as osConstants } from 'node:os';

import type { RawMismatchReason, RawSignalMode, RawVerdict } from './addon-contract';

// Must match the enum order in native/pidfd.h.
const OUTCOMES = ['verified', 'signalled', 'already_exited', 'identity_mismatch', 'unsupported', 'error'] as const;
const MISMATCHES: ReadonlyArray<RawMismatchReason | null> = [
  null,
  'boot_id',
  'start_ticks',
  'pidfs_ino',
  'not_group_leader',
];
const MODES: ReadonlyArray<RawSignalMode | null> = [null, 'pidfd', 'pidfd-process-group', 'pgid-after-pidfd-check'];

const errnoNames = new Map<number, string>(Object.entries(osConstants.errno).map(([name, number]) => [number, name]));
const decoded = new Map<number, RawVerdict>();

function build(code: number): RawVerdict {
  const outcome = OUTCOMES[code & 0xf];
  const mismatch = MISMATCHES[(code >> 4) & 0xf] ?? null;
  const mode = MODES[(code >> 8) & 0xf] ?? null;
  const errno = (code >>> 16) & 0x7fff;
  switch (outcome) {
    case 'signalled':
      return Object.freeze({ kind: outcome, mode: mode ?? 'pidfd' });
    case 'identity_mismatch':
      return Object.freeze({ kind: outcome, reason: mismatch ?? 'start_ticks' });
    case 'already_exited':
    case 'unsupported':
      return Object.freeze({ kind: outcome });
    case 'error':
      return Object.freeze({ kind: outcome, errno: errnoNames.get(errno) ?? `E${errno}` });
    default:
      // 'verified' is never returned by signalVerified; an unknown code is a version skew.
      return Object.freeze({ kind: 'error', errno: 'EPROTO' });
  }
}

export function decodeVerdict(code: number): RawVerdict {
  let verdict = decoded.get(code);
  if (verdict === undefined) {
    verdict = build(code);
    decoded.set(code, verdict);
  }
  return verdict;
}
