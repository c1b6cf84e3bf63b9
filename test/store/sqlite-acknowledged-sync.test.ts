// Acknowledged means durable (docs/decisions/0010): the real CLI under strace shows an fsync of the
// WAL between an acknowledged commit's WAL writes and the message that acknowledges it (and before a
// receipt's unlink); a copy of the store files taken while the CLI is frozen at its acknowledgement,
// cut to what had been synced, still holds every acknowledged fact (a power cut, emulated).
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { signalVerified } from '../../lib/native/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { groupMembers } from '../helpers/job-groups';
import { runStatusOf as runStatusOfStore } from '../execution/clock-runs';
import { CLI, grantCancelOnSqlite, sqliteJobGroup, startRun } from '../execution/cli-runs';
import { spawnJob, type Job } from '../helpers/processes';
import { tempFile } from '../helpers/temp-file';
import { until } from '../helpers/wait';
import { driverOf } from '../../lib/store/sqlite/driver';

const PAUSE = path.resolve(__dirname, '..', 'helpers', 'ack-pause.js');
const TRACED = 'pwrite64,write,fsync,fdatasync,unlink,rename,renameat,renameat2';

interface Traced {
  readonly job: Job;
  readonly log: string;
}

function storeDir(t: ExecutionContext): string {
  const temp = tempFile('pidfence-ack-');
  t.teardown(() => temp.cleanup());
  mkdirSync(path.dirname(temp.file), { recursive: true });
  return path.dirname(temp.file);
}

/** `pidfence <args>` under strace (-f: the launcher too; -y: every fd with its path). */
function tracedCli(
  t: ExecutionContext,
  dir: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Traced {
  const log = path.join(dir, `strace-${args[0]}.log`);
  const assignments = Object.entries(env)
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .join(' ');
  const job = spawnJob(t, 'sh', [
    '-c',
    `${assignments} exec strace -f -y -qq -s 200 -e trace=${TRACED} -o "$0" "$@" 2>&1`,
    log,
    process.execPath,
    '--require',
    PAUSE,
    CLI,
    ...args,
  ]);
  return { job, log };
}

interface Call {
  readonly name: string;
  readonly path: string;
  readonly line: string;
}

function callsOf(log: string): Call[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const match = /^\d+\s+(\w+)\((?:\d+<([^>]*)>|"([^"]*)")/.exec(line);
      return match === null ? [] : [{ name: match[1] ?? '', path: match[2] ?? match[3] ?? '', line }];
    });
}

const isWal = (call: Call): boolean => call.path.endsWith('-wal');
const isSync = (call: Call): boolean => (call.name === 'fsync' || call.name === 'fdatasync') && isWal(call);

/** Index of the first stdout/stderr write whose text matches `pattern`. */
function acknowledgementAt(calls: readonly Call[], pattern: RegExp): number {
  const index = calls.findIndex(
    (call) => call.name === 'write' && /^\d+\s+write\([12]</.test(call.line) && pattern.test(call.line),
  );
  if (index < 0) throw new Error(`no acknowledgement matching ${pattern} in the trace`);
  return index;
}

/** A WAL fsync lies strictly between `from` (something the acknowledged commit must follow) and `to`. */
function assertSyncedBetween(
  t: ExecutionContext,
  calls: readonly Call[],
  from: number,
  to: number,
  what: string,
): void {
  t.true(from >= 0 && from < to, `${what}: the trace holds what the commit follows`);
  t.true(calls.slice(from + 1, to).some(isSync), `${what}: an fsync of the WAL lies between the commit and it`);
}

/** This process's first WAL frame write (not the 32-byte WAL header at offset 0). */
function firstFrameWrite(calls: readonly Call[]): number {
  return calls.findIndex((call) => call.name === 'pwrite64' && isWal(call) && !/, 32, 0\) += 32$/.test(call.line));
}

/** The last WAL frame write before `index` (the commit an acknowledgement at `index` follows). */
function lastFrameBefore(calls: readonly Call[], index: number): number {
  return (
    calls
      .slice(0, index)
      .map((call, at) => ({ call, at }))
      .filter(({ call }) => call.name === 'pwrite64' && isWal(call))
      .at(-1)?.at ?? -1
  );
}

/** The launcher's rename of the receipt into place: the run's end can only be committed after it. */
function receiptInPlace(calls: readonly Call[]): number {
  // The native launcher renames relative to the receipt directory's fd: renameat(dirfd, "<id>.receipt.tmp", ...).
  return calls.findIndex((call) => /^rename(at2?)?$/.test(call.name) && call.line.includes('.receipt.tmp"'));
}

/** How many bytes of the WAL had been synced before `index` (writes after the last sync are lost in a power cut). */
function syncedWalBytes(calls: readonly Call[], index: number): number {
  let written = 0;
  let synced = 0;
  for (const call of calls.slice(0, index)) {
    if (call.name === 'pwrite64' && isWal(call)) {
      const sizes = /, (\d+), (\d+)\) += \d+$/.exec(call.line);
      if (sizes !== null) written = Math.max(written, Number(sizes[1]) + Number(sizes[2]));
    } else if (isSync(call)) {
      synced = written;
    }
  }
  return synced;
}

interface Frozen {
  readonly db: Buffer;
  readonly wal: Buffer;
}

/** Runs `traced` to its acknowledgement, copies the store files while it is frozen there, then lets it go on. */
async function copyAtAcknowledgement(db: string, traced: Traced, marker: string, fifo: string): Promise<Frozen> {
  await until(() => existsSync(marker), { timeoutMs: 20_000, what: 'the CLI frozen at its acknowledgement' });
  const frozen = { db: readFileSync(db), wal: existsSync(`${db}-wal`) ? readFileSync(`${db}-wal`) : Buffer.alloc(0) };
  await until(
    () => {
      try {
        const fd = openSync(fifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
        writeSync(fd, 'g');
        closeSync(fd);
        return true;
      } catch {
        return false; // ENXIO: the CLI has not opened its end yet
      }
    },
    { what: 'the CLI released' },
  );
  await traced.job.exited;
  return frozen;
}

/** The store as a power cut at the acknowledgement would leave it: the WAL cut to its synced bytes. */
function powerCutCopy(dir: string, frozen: Frozen, syncedBytes: number): string {
  const copy = path.join(dir, 'power-cut.db');
  writeFileSync(copy, frozen.db);
  writeFileSync(`${copy}-wal`, frozen.wal.subarray(0, syncedBytes));
  return copy;
}

function pauseEnv(dir: string, pattern: string): { env: Record<string, string>; marker: string; fifo: string } {
  const fifo = path.join(dir, 'release.fifo');
  const marker = path.join(dir, 'frozen');
  execFileSync('mkfifo', [fifo]);
  return {
    env: { PIDFENCE_TEST_ACK_PATTERN: pattern, PIDFENCE_TEST_ACK_FIFO: fifo, PIDFENCE_TEST_ACK_MARKER: marker },
    marker,
    fifo,
  };
}

async function checkpointed(db: string): Promise<void> {
  const store = openSqliteStore(db);
  try {
    const [row] = driverOf(store.database).pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    if (row?.busy !== 0) throw new Error('the checkpoint before the cancel was busy');
  } finally {
    store.close();
  }
}

async function runningJob(t: ExecutionContext, db: string): Promise<string> {
  const running = await startRun(t, db, sqliteJobGroup(db), ['sleep', '30']);
  await grantCancelOnSqlite(db);
  await checkpointed(db);
  return running.runId;
}

test('acknowledged means synced: `cancel` fsyncs the WAL after its commit and before it says "cancel requested"', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const runId = await runningJob(t, db);
  const traced = tracedCli(t, dir, ['cancel', '--db', db, runId]);
  t.is((await traced.job.exited).code, 0, traced.job.lines.join('\n'));
  const calls = callsOf(traced.log);
  assertSyncedBetween(
    t,
    calls,
    firstFrameWrite(calls),
    acknowledgementAt(calls, /cancel requested/),
    '"cancel requested"',
  );
});

test('acknowledged means synced: `run` fsyncs the job\'s start before it says "started", and the end before it removes the receipt and before it prints the result', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const traced = tracedCli(t, dir, ['run', '--db', db, '--', 'true']);
  t.is((await traced.job.exited).code, 0, traced.job.lines.join('\n'));
  const calls = callsOf(traced.log);
  const unlink = calls.findIndex((call) => call.name === 'unlink' && call.path.endsWith('.receipt'));
  t.true(unlink >= 0, 'the receipt was removed');
  assertSyncedBetween(t, calls, receiptInPlace(calls), unlink, "the receipt's unlink");
  assertSyncedBetween(t, calls, receiptInPlace(calls), acknowledgementAt(calls, /succeeded/), 'the result');
  // The last WAL frame before "started" is the handle's commit; a WAL fsync must follow it.
  const started = acknowledgementAt(calls, /started/);
  assertSyncedBetween(t, calls, lastFrameBefore(calls, started), started, '"started"');
});

test('acknowledged means synced: `grant` fsyncs its change before it answers', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const traced = tracedCli(t, dir, ['grant', '--bootstrap', '--db', db, 'root', 'proj', 'grants.write']);
  t.is((await traced.job.exited).code, 0, traced.job.lines.join('\n'));
  const calls = callsOf(traced.log);
  const answer = calls.findIndex((call) => /^\d+\s+write\([12]</.test(call.line));
  t.true(answer >= 0, 'grant answered');
  assertSyncedBetween(t, calls, firstFrameWrite(calls), answer, "the grant's answer");
});

test('power cut emulated at "cancel requested": the synced store files hold the cancel', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const runId = await runningJob(t, db);
  const pause = pauseEnv(dir, 'cancel requested');
  const traced = tracedCli(t, dir, ['cancel', '--db', db, runId], pause.env);
  const frozen = await copyAtAcknowledgement(db, traced, pause.marker, pause.fifo);
  const calls = callsOf(traced.log);
  const copy = powerCutCopy(dir, frozen, syncedWalBytes(calls, acknowledgementAt(calls, /cancel requested/)));
  const store = openSqliteStore(copy);
  try {
    const run = await store.runStore.getRun(runId);
    t.like(run, { cancelReason: 'user' });
    t.not(run?.cancelRequestedAtMs ?? null, null);
  } finally {
    store.close();
  }
});

test('power cut emulated at the result of `run`: the synced store files hold the end it printed', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const pause = pauseEnv(dir, 'succeeded');
  const traced = tracedCli(t, dir, ['run', '--db', db, '--', 'true'], pause.env);
  const frozen = await copyAtAcknowledgement(db, traced, pause.marker, pause.fifo);
  const calls = callsOf(traced.log);
  const runId = /run (run-[0-9a-f-]+) succeeded/.exec(traced.job.lines.join('\n'))?.[1] ?? '';
  t.not(runId, '');
  const copy = powerCutCopy(dir, frozen, syncedWalBytes(calls, acknowledgementAt(calls, /succeeded/)));
  const store = openSqliteStore(copy);
  try {
    t.like(await store.runStore.getRun(runId), { status: 'succeeded' });
  } finally {
    store.close();
  }
});

test('acknowledged means synced: `supervise` fsyncs the end it commits for a job it adopted before it removes the receipt', async (t) => {
  const dir = storeDir(t);
  const db = path.join(dir, 'pidfence.db');
  const run = await startRun(t, db, sqliteJobGroup(db), ['sleep', '3']);
  t.is(signalVerified(run.job.identity, 'SIGKILL', { group: false }).kind, 'signalled');
  await run.job.exited;
  const traced = tracedCli(t, dir, ['supervise', '--db', db, '--grace', '300ms']);
  await until(() => runStatusOfStore(db, run.runId) === 'succeeded', {
    timeoutMs: 20_000,
    intervalMs: 100,
    what: 'supervise ended the adopted run',
  });
  // SIGTERM to supervise itself (strace, the group's leader, passes it on and exits with it).
  const node = groupMembers(traced.job.identity.pgid).find(
    (member) => readFileSync(`/proc/${member.pid}/comm`, 'utf8').trim() === 'node',
  );
  t.is(node === undefined ? 'missing' : signalVerified(node, 'SIGTERM', { group: false }).kind, 'signalled');
  await traced.job.exited;
  const calls = callsOf(traced.log);
  const unlink = calls.findIndex((call) => call.name === 'unlink' && call.path.endsWith('.receipt'));
  t.true(unlink >= 0, 'supervise removed the receipt');
  assertSyncedBetween(t, calls, lastFrameBefore(calls, unlink), unlink, "the receipt's unlink by supervise");
});
