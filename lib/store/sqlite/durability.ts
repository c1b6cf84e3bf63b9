// Which SQLite commits are on disk before pidfence acknowledges them (docs/decisions/0010): the
// connection runs WAL with synchronous=NORMAL for routine dispatch traffic, and these operations
// commit with synchronous=FULL, whose commit fsyncs the WAL (and with it every earlier frame).
// Also which writes may spend the disk reserve when the disk is full (docs/decisions/0191).
import { CONNECTION_SQL, synchronousPragma } from './connection-statements';
import type { SqliteDriver } from './driver';

/**
 * The writes a person or a caller is told about, or that let a receipt (the only other copy of an
 * exit status) be removed or moved: a cancel intent, a run's end, a management verb's change, the
 * intent that precedes a quarantine move. (A job's start, `run`'s "started", asks for a synced
 * commit by itself: advanceAttempt to `running`, see SqliteRunStore.)
 */
export const ACKNOWLEDGED_WRITES: ReadonlySet<string> = new Set([
  'requestCancellation',
  'requestCancellations',
  'completeAttempt',
  'completeAttempts',
  'markTerminal',
  'endAttempt',
  'recordQuarantineIntent',
  'rearm',
  'writeGrant',
  'revokeGrant',
]);

/**
 * The stop path (docs/decisions/0191): the writes that stop a job and end its run. When the disk is
 * full they may spend the store's disk reserve; starting a job, a runner or a management change may not.
 */
export const STOP_PATH_WRITES: ReadonlySet<string> = new Set([
  'requestCancellation',
  'requestCancellations',
  'claim',
  'claimPage',
  'claimDuePage',
  'recordResult',
  'recordResults',
  'completeAttempt',
  'completeAttempts',
  'markTerminal',
  'endAttempt',
  'recordQuarantineIntent',
  'recordReceiptDeletion',
  'closeJournalEntry',
  'adoptAttempts',
  'endRunner',
]);

/** SQLite's numbers for PRAGMA synchronous (OFF 0, NORMAL 1, FULL 2, EXTRA 3). */
const SYNCHRONOUS_FULL = 2;

const openedLevel = new WeakMap<SqliteDriver, number>();

function levelOf(database: SqliteDriver): number {
  let level = openedLevel.get(database);
  if (level === undefined) {
    level = Number(database.pragma(CONNECTION_SQL.synchronous, { simple: true }));
    openedLevel.set(database, level);
  }
  return level;
}

/**
 * Runs `commit` (one transaction) so that its COMMIT is synced. Inside an outer transaction the
 * work is a savepoint of that one and the outer transaction's commit decides; a connection opened
 * FULL or stronger already syncs every commit.
 */
export function withSyncedCommit<T>(database: SqliteDriver, commit: () => T): T {
  const level = levelOf(database);
  if (level >= SYNCHRONOUS_FULL || database.inTransaction) return commit();
  database.pragma(synchronousPragma(SYNCHRONOUS_FULL));
  try {
    return commit();
  } finally {
    database.pragma(synchronousPragma(level));
  }
}
