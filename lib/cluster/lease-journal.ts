// The worker's record of the leases it holds (docs/decisions/0272): one small file per run beside its
// SQLite journal, written and synced before the job starts, removed once the control plane took the
// run's end. A restarted worker reads them to re-attach its runs; without them it could not say which
// of the control plane's runs are its own. Beside them, one record per session this journal
// registered, with the local runner that pulled under it (docs/decisions/0360): once that runner is
// proved gone, a run its session holds and no lease file names was never started. No PID, handle or
// command is written here.
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

/** A session this journal's worker registered, and the local runner (process) that pulled under it. */
export interface JournaledSession {
  readonly sessionId: string;
  readonly runnerId: string;
}

/** At most this many records are read back: far above any worker's capacity. */
const JOURNALED_LEASES_MAX = 4_096;
/** Session records read back at a start: each start adds one and settles the older ones. */
const JOURNALED_SESSIONS_MAX = 64;

export class LeaseJournal {
  readonly #directory: string;
  readonly #sessions: string;

  constructor(journalFile: string) {
    this.#directory = `${path.resolve(journalFile)}.leases`;
    this.#sessions = path.join(this.#directory, 'sessions');
    mkdirSync(this.#sessions, { recursive: true, mode: 0o700 });
    syncDirectory(this.#directory);
  }

  /** Synced before the job is admitted: a crash leaves the old record or the new. */
  write(lease: JournaledLease): void {
    writeSynced(this.#fileOf(lease.runId), JSON.stringify(lease));
  }

  remove(runId: string): void {
    this.removeAll([runId]);
  }

  /** The records of runs whose ends were taken together, with one directory sync for them all. */
  removeAll(runIds: readonly string[]): void {
    if (runIds.length === 0) return;
    for (const runId of runIds) rmSync(this.#fileOf(runId), { force: true });
    syncDirectory(this.#directory);
  }

  /** Synced before this session pulls anything (docs/decisions/0360). */
  recordSession(session: JournaledSession): void {
    writeSynced(this.#sessionFileOf(session.sessionId), JSON.stringify(session));
  }

  removeSession(sessionId: string): void {
    rmSync(this.#sessionFileOf(sessionId), { force: true });
    syncDirectory(this.#sessions);
  }

  /** Every readable session record; a torn one is skipped (it proves nothing, its runs wait for a forget). */
  sessions(): JournaledSession[] {
    return readRecords(this.#sessions, JOURNALED_SESSIONS_MAX, parseSession);
  }

  /** Every readable record; a torn or foreign file is skipped (it proves nothing). */
  read(): JournaledLease[] {
    return readRecords(this.#directory, JOURNALED_LEASES_MAX, parseLease);
  }

  #fileOf(runId: string): string {
    return path.join(this.#directory, `${encodeURIComponent(validateId(runId, 'runId'))}.json`);
  }

  #sessionFileOf(sessionId: string): string {
    return path.join(this.#sessions, `${encodeURIComponent(validateId(sessionId, 'sessionId'))}.json`);
  }
}

/** The `.json` records of a directory, at most `max` files looked at; what does not parse is skipped. */
function readRecords<T>(directory: string, max: number, parse: (text: string) => T | null): T[] {
  const records: T[] = [];
  for (const name of readdirSync(directory).slice(0, max)) {
    if (!name.endsWith('.json')) continue;
    const record = parse(readFileSync(path.join(directory, name), 'utf8'));
    if (record !== null) records.push(record);
  }
  return records;
}

/** Written to a temporary name, synced, renamed, and the directory synced: a crash leaves the old or the new. */
function writeSynced(file: string, text: string): void {
  const temporary = `${file}.tmp`;
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  syncDirectory(path.dirname(file));
}

function syncDirectory(directory: string): void {
  const fd = openSync(directory, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function parseSession(text: string): JournaledSession | null {
  try {
    const value = JSON.parse(text) as Partial<JournaledSession>;
    return { sessionId: validateId(value.sessionId, 'sessionId'), runnerId: validateId(value.runnerId, 'runnerId') };
  } catch {
    return null;
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
