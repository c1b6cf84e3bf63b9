// The worker's record of the leases it holds (docs/decisions/0272): one small file per run beside its
// SQLite journal, written and synced before the job starts, removed once the control plane took the
// run's end. A restarted worker reads them to re-attach its runs; without them it could not say which
// of the control plane's runs are its own. No PID, handle or command is written here.
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

import { validateId } from '../contract/index';

export interface JournaledLease {
  readonly runId: string;
  readonly projectId: string;
  readonly attemptId: string;
  readonly fence: number;
  /** The local attempt of the same run; null until admission answered. */
  readonly localAttemptId: string | null;
  /** Opt-in (docs/decisions/0273): stop the job after this long without a renewal; null: never. */
  readonly stopAfterDisconnectMs: number | null;
}

/** At most this many records are read back: far above any worker's capacity. */
const JOURNALED_LEASES_MAX = 4_096;

export class LeaseJournal {
  readonly #directory: string;

  constructor(journalFile: string) {
    this.#directory = `${path.resolve(journalFile)}.leases`;
    mkdirSync(this.#directory, { recursive: true, mode: 0o700 });
  }

  /** Written to a temporary name, synced, renamed, and the directory synced: a crash leaves the old or the new. */
  write(lease: JournaledLease): void {
    const file = this.#fileOf(lease.runId);
    const temporary = `${file}.tmp`;
    const fd = openSync(temporary, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify(lease));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, file);
    this.#syncDirectory();
  }

  remove(runId: string): void {
    rmSync(this.#fileOf(runId), { force: true });
    this.#syncDirectory();
  }

  /** Every readable record; a torn or foreign file is skipped (it proves nothing). */
  read(): JournaledLease[] {
    const leases: JournaledLease[] = [];
    for (const name of readdirSync(this.#directory).slice(0, JOURNALED_LEASES_MAX)) {
      if (!name.endsWith('.json')) continue;
      const lease = parseLease(readFileSync(path.join(this.#directory, name), 'utf8'));
      if (lease !== null) leases.push(lease);
    }
    return leases;
  }

  #fileOf(runId: string): string {
    return path.join(this.#directory, `${encodeURIComponent(validateId(runId, 'runId'))}.json`);
  }

  #syncDirectory(): void {
    const fd = openSync(this.#directory, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

function parseLease(text: string): JournaledLease | null {
  try {
    const value = JSON.parse(text) as Partial<JournaledLease>;
    const fence = value.fence;
    if (typeof fence !== 'number' || !Number.isSafeInteger(fence) || fence < 1) return null;
    const stopAfter = value.stopAfterDisconnectMs ?? null;
    return {
      runId: validateId(value.runId, 'runId'),
      projectId: validateId(value.projectId, 'projectId'),
      attemptId: validateId(value.attemptId, 'attemptId'),
      fence,
      localAttemptId:
        value.localAttemptId === null || value.localAttemptId === undefined
          ? null
          : validateId(value.localAttemptId, 'attemptId'),
      stopAfterDisconnectMs:
        typeof stopAfter === 'number' && Number.isSafeInteger(stopAfter) && stopAfter > 0 ? stopAfter : null,
    };
  } catch {
    return null;
  }
}
