// One pass over /proc: every process with its stat, for the questions only a scan can answer
// ("does any live process still use this group id?").
import { readdirSync } from 'node:fs';

import { readProcessStat, type ProcessStat } from '../native/index';

export interface ScannedProcess {
  readonly pid: number;
  /** null: it exited before it was read; 'unreadable': reading it failed (the caller decides what doubt means). */
  readonly stat: ProcessStat | null | 'unreadable';
}

export function* scanProcesses(): Generator<ScannedProcess> {
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    let stat: ProcessStat | null | 'unreadable';
    try {
      stat = readProcessStat(pid);
    } catch {
      stat = 'unreadable';
    }
    yield { pid, stat };
  }
}
