// Throw-away PostgreSQL clusters for tests (design/architecture §7, design/postgres §Verification, HA gate): initdb / pg_ctl on free
// loopback ports, streaming standbys via pg_basebackup -R, promotion. Server binaries refuse to run as
// root, so as root every server command runs as the `postgres` user through runuser.
import { constants as osConstants } from 'node:os';
import { spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PidfenceError } from '../../lib/base/errors';
import { captureIdentity, signalVerified } from '../../lib/native/index';

/** initdb does real I/O on 2 shared cores; measured ~1-3 s here, so 60 s means something is wrong. */
const INIT_TIMEOUT_MS = 60_000;
/** pg_ctl -w waits this long for the server to accept connections (measured ~1-2 s here). */
const START_TIMEOUT_S = 30;
/** A fast shutdown that takes longer than this is escalated to an immediate one. */
const STOP_TIMEOUT_S = 20;
/** pg_basebackup of a fresh cluster copies ~30 MB; fast checkpoint keeps it to a few seconds. */
const BASEBACKUP_TIMEOUT_MS = 120_000;
/** pg_ctl promote -w returns once the server leaves recovery. */
const PROMOTE_TIMEOUT_S = 30;
/** A port found free may be taken before the server binds it; retry with a new one this often. */
const START_PORT_ATTEMPTS = 3;
/** Enough of the server log to see why it failed, short enough to read in an error message. */
const LOG_TAIL_LINES = 25;
/** A TCP probe of a loopback port answers in well under this. */
const PORT_PROBE_TIMEOUT_MS = 1_000;

/** The OS user that owns clusters when this process runs as root (the server refuses root). */
export const SERVER_OS_USER = 'postgres';
/** The superuser every throw-away cluster is created with (initdb -U). */
export const CLUSTER_SUPERUSER = 'postgres';

export interface PgServerBinaries {
  readonly binDir: string;
  /** Major version, e.g. 15. */
  readonly majorVersion: number;
}

/** Extra postgresql.conf settings, e.g. `{ wal_level: 'replica', max_wal_senders: 4 }`. */
export type PgSettings = Readonly<Record<string, string | number | boolean>>;

export interface ClusterInitOptions {
  /** Appears in the temp dir name, to tell clusters apart in `ls /tmp`. */
  readonly label?: string;
  readonly settings?: PgSettings;
}

export interface PgCluster {
  readonly label: string;
  readonly binaries: PgServerBinaries;
  /** The temp dir holding everything below; clusterRemove deletes it. */
  readonly baseDir: string;
  readonly dataDir: string;
  /** Unix socket dir: inside baseDir so clusters never share a socket or lock file. */
  readonly socketDir: string;
  readonly logFile: string;
  /** The loopback TCP port while running (set by clusterStart), undefined otherwise. */
  port: number | undefined;
}

export interface StandbyCreateOptions extends ClusterInitOptions {
  /** Sent as application_name, so it can appear in the primary's synchronous_standby_names. */
  readonly applicationName?: string;
}

interface CommandResult {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
  readonly timedOut: boolean;
}

// ---------------------------------------------------------------------------------------------
// Binaries

/** The newest installed server binaries, or undefined when none are installed. */
export function findServerBinaries(): PgServerBinaries | undefined {
  const candidates = [...binDirsFromPgConfig(), ...binDirsUnderUsrLib()];
  const usable = candidates
    .filter(hasServerBinaries)
    .map((binDir) => ({ binDir, majorVersion: serverMajorVersion(binDir) }))
    .filter((found): found is PgServerBinaries => found.majorVersion !== undefined);
  usable.sort((a, b) => b.majorVersion - a.majorVersion);
  return usable[0];
}

/**
 * The newest server binaries; installs them with apt-get when missing and running as root (this is
 * what makes `npm test` pass on a fresh machine). Fails with one line on what to do otherwise.
 */
export function ensureServerBinaries(): PgServerBinaries {
  const found = findServerBinaries();
  if (found !== undefined) return found;
  if (isRoot() && commandExists('apt-get')) {
    process.stderr.write('pidfence tests: PostgreSQL server binaries missing; installing with apt-get (as root)\n');
    installServerWithApt();
    const installed = findServerBinaries();
    if (installed !== undefined) return installed;
  }
  throw new PidfenceError(
    'PostgreSQL server binaries (initdb, pg_ctl) not found: install them (`apt-get install -y postgresql` as root) ' +
      'or point PIDFENCE_TEST_DATABASE_URL at a running server',
    'ERR_PIDFENCE_TEST_PG_BINARIES',
  );
}

function binDirsFromPgConfig(): string[] {
  const result = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8', timeout: 5_000 });
  if (result.status !== 0 || typeof result.stdout !== 'string') return [];
  const binDir = result.stdout.trim();
  return binDir === '' ? [] : [binDir];
}

function binDirsUnderUsrLib(): string[] {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return [];
  return readdirSync(root).map((version) => join(root, version, 'bin'));
}

function hasServerBinaries(binDir: string): boolean {
  return ['initdb', 'pg_ctl', 'postgres', 'pg_basebackup'].every((name) => existsSync(join(binDir, name)));
}

function serverMajorVersion(binDir: string): number | undefined {
  const result = spawnSync(join(binDir, 'postgres'), ['--version'], { encoding: 'utf8', timeout: 5_000 });
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(result.stdout ?? '');
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

function installServerWithApt(): void {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', 'postgresql']]) {
    const result = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env, timeout: 600_000 });
    if (result.status !== 0) {
      throw new PidfenceError(
        `\`apt-get ${args.join(' ')}\` failed (exit ${String(result.status)}): install PostgreSQL yourself ` +
          'or point PIDFENCE_TEST_DATABASE_URL at a running server',
        'ERR_PIDFENCE_TEST_PG_INSTALL',
      );
    }
  }
}

function commandExists(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

/** Creates a cluster in a new temp dir (not started): trust auth, superuser `postgres`. */
export async function clusterInit(options: ClusterInitOptions = {}): Promise<PgCluster> {
  const cluster = clusterLayoutCreate(options.label ?? 'cluster', ensureServerBinaries());
  const result = await runServerCommand(
    cluster,
    'initdb',
    // --no-sync: a throw-away cluster need not survive a power cut, and fsyncing ~1,000 files costs seconds here.
    ['-D', cluster.dataDir, '-A', 'trust', '-U', CLUSTER_SUPERUSER, '-E', 'UTF8', '--no-sync', '--no-instructions'],
    INIT_TIMEOUT_MS,
  );
  if (!commandSucceeded(result)) {
    await clusterRemove(cluster);
    throw commandError('ERR_PIDFENCE_TEST_PG_INIT', `initdb for cluster ${cluster.label} failed`, result);
  }
  settingsAppend(cluster, options.settings ?? {});
  return cluster;
}

/** Starts the cluster on a free 127.0.0.1 port (TCP on loopback only) and waits until it accepts. */
export async function clusterStart(cluster: PgCluster): Promise<number> {
  let last: CommandResult | undefined;
  for (let attempt = 1; attempt <= START_PORT_ATTEMPTS; attempt++) {
    const port = await freeLoopbackPort();
    // pg_ctl hands -o to /bin/sh, hence the quotes around the path.
    const serverOptions = `-p ${port} -k '${cluster.socketDir}' -c listen_addresses=127.0.0.1`;
    last = await runServerCommand(
      cluster,
      'pg_ctl',
      ['start', '-D', cluster.dataDir, '-l', cluster.logFile, '-w', '-t', String(START_TIMEOUT_S), '-o', serverOptions],
      (START_TIMEOUT_S + 10) * 1_000,
    );
    if (commandSucceeded(last)) {
      cluster.port = port;
      return port;
    }
    // A server that did not come up in time may still be starting: never leave it behind.
    await clusterStopImmediate(cluster);
    if (!serverLogTail(cluster).includes('could not bind')) break;
  }
  throw commandError('ERR_PIDFENCE_TEST_PG_START', `cluster ${cluster.label} did not start`, last, cluster);
}

/**
 * How to stop: `fast` rolls back sessions and writes a shutdown checkpoint (a planned switchover);
 * `immediate` quits every process at once, like a crash (the HA gate's lost primary).
 */
export type ClusterStopMode = 'fast' | 'immediate';

/** Fast shutdown (escalated to immediate if it hangs), or immediate. Idempotent: a stopped cluster is left as is. */
export async function clusterStop(cluster: PgCluster, mode: ClusterStopMode = 'fast'): Promise<void> {
  if (!clusterIsRunning(cluster)) {
    cluster.port = undefined;
    return;
  }
  if (mode === 'immediate') {
    await clusterStopImmediate(cluster);
    if (clusterIsRunning(cluster))
      throw commandError('ERR_PIDFENCE_TEST_PG_STOP', `cluster ${cluster.label} did not stop`, undefined, cluster);
    cluster.port = undefined;
    return;
  }
  const fast = await runServerCommand(
    cluster,
    'pg_ctl',
    ['stop', '-D', cluster.dataDir, '-m', 'fast', '-w', '-t', String(STOP_TIMEOUT_S)],
    (STOP_TIMEOUT_S + 10) * 1_000,
  );
  if (!commandSucceeded(fast)) await clusterStopImmediate(cluster);
  if (clusterIsRunning(cluster)) {
    throw commandError('ERR_PIDFENCE_TEST_PG_STOP', `cluster ${cluster.label} did not stop`, fast, cluster);
  }
  cluster.port = undefined;
}

/**
 * Restarts a running cluster on its port (pg_ctl reuses the options it was started with): `fast`
 * ends every session with an admin-shutdown error and writes a shutdown checkpoint, as a planned
 * server restart does. Resolves once the server accepts connections again.
 */
export async function clusterRestart(cluster: PgCluster): Promise<void> {
  const result = await runServerCommand(
    cluster,
    'pg_ctl',
    ['restart', '-D', cluster.dataDir, '-l', cluster.logFile, '-m', 'fast', '-w', '-t', String(START_TIMEOUT_S)],
    (STOP_TIMEOUT_S + START_TIMEOUT_S + 10) * 1_000,
  );
  if (!commandSucceeded(result)) {
    throw commandError('ERR_PIDFENCE_TEST_PG_START', `restart of cluster ${cluster.label} failed`, result, cluster);
  }
}

/** Stops the cluster if needed and deletes its temp dir. Idempotent. */
export async function clusterRemove(cluster: PgCluster): Promise<void> {
  try {
    await clusterStop(cluster);
  } finally {
    rmSync(cluster.baseDir, { recursive: true, force: true });
    liveClusters.delete(cluster);
  }
}

/**
 * Creates a streaming standby of a running primary with `pg_basebackup -R` (not started; start it
 * with clusterStart). The primary needs wal_level >= replica and free wal senders (PG 15 defaults).
 */
export async function standbyCreate(primary: PgCluster, options: StandbyCreateOptions = {}): Promise<PgCluster> {
  if (primary.port === undefined) {
    throw new PidfenceError(
      `primary ${primary.label} is not running: clusterStart it first`,
      'ERR_PIDFENCE_TEST_PG_BASEBACKUP',
    );
  }
  const standby = clusterLayoutCreate(options.label ?? `${primary.label}-standby`, primary.binaries);
  const applicationName = options.applicationName ?? 'pidfence_standby';
  const conninfo = `host=127.0.0.1 port=${primary.port} user=${CLUSTER_SUPERUSER} application_name=${applicationName}`;
  const result = await runServerCommand(
    standby,
    'pg_basebackup',
    ['-d', conninfo, '-D', standby.dataDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
    BASEBACKUP_TIMEOUT_MS,
  );
  if (!commandSucceeded(result)) {
    await clusterRemove(standby);
    throw commandError(
      'ERR_PIDFENCE_TEST_PG_BASEBACKUP',
      `pg_basebackup from ${primary.label} failed`,
      result,
      primary,
    );
  }
  // The copied postmaster.opts/log belong to the primary; the standby writes its own.
  rmSync(join(standby.dataDir, 'postmaster.opts'), { force: true });
  settingsAppend(standby, options.settings ?? {});
  return standby;
}

/** Promotes a standby and waits until it has left recovery (its timeline moves on by one). */
export async function clusterPromote(cluster: PgCluster): Promise<void> {
  const result = await runServerCommand(
    cluster,
    'pg_ctl',
    ['promote', '-D', cluster.dataDir, '-w', '-t', String(PROMOTE_TIMEOUT_S)],
    (PROMOTE_TIMEOUT_S + 10) * 1_000,
  );
  if (!commandSucceeded(result)) {
    throw commandError('ERR_PIDFENCE_TEST_PG_PROMOTE', `promotion of ${cluster.label} failed`, result, cluster);
  }
}

/** A connection URL for the cluster's superuser over loopback TCP. */
export function clusterUrl(cluster: PgCluster, database = 'postgres'): string {
  if (cluster.port === undefined) {
    throw new PidfenceError(
      `cluster ${cluster.label} is not running: clusterStart it first`,
      'ERR_PIDFENCE_TEST_PG_START',
    );
  }
  return `postgres://${CLUSTER_SUPERUSER}@127.0.0.1:${cluster.port}/${encodeURIComponent(database)}`;
}

/** True while a postmaster holds the data dir (its postmaster.pid exists). */
export function clusterIsRunning(cluster: PgCluster): boolean {
  return existsSync(join(cluster.dataDir, 'postmaster.pid'));
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function loopbackPortIsOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const finish = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(PORT_PROBE_TIMEOUT_MS, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
    socket.connect(port, '127.0.0.1');
  });
}

/** A port the kernel just handed out on 127.0.0.1 (bind to 0, read it, release it). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port from bind(0)'))));
    });
  });
}

/** The last lines of the server log, with anything that looks like a password blanked out. */
export function serverLogTail(cluster: PgCluster, lines = LOG_TAIL_LINES): string {
  if (!existsSync(cluster.logFile)) return '';
  const text = readFileSync(cluster.logFile, 'utf8');
  return secretsRedact(
    text
      .split('\n')
      .slice(-lines - 1)
      .join('\n')
      .trimEnd(),
  );
}

/** Blanks passwords in URLs, conninfo strings and CREATE/ALTER ROLE statements. */
export function secretsRedact(text: string): string {
  return text
    .replace(/(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1***@')
    .replace(/(password\s*=\s*)('[^']*'|\S+)/gi, '$1***')
    .replace(/(PASSWORD\s+)'(?:[^']|'')*'/gi, "$1'***'");
}

// ---------------------------------------------------------------------------------------------
// Internals

function clusterLayoutCreate(label: string, binaries: PgServerBinaries): PgCluster {
  const safeLabel = label.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 32);
  const baseDir = mkdtempSync(join(tmpdir(), `pidfence-pg-${safeLabel}-`));
  const cluster: PgCluster = {
    label: safeLabel,
    binaries,
    baseDir,
    dataDir: join(baseDir, 'data'),
    socketDir: join(baseDir, 'socket'),
    logFile: join(baseDir, 'server.log'),
    port: undefined,
  };
  // Register before anything can fail, so exit cleanup sees every dir we created.
  liveClustersRegister(cluster);
  mkdirSync(cluster.socketDir, { mode: 0o700 });
  writeFileSync(cluster.logFile, '');
  if (isRoot()) {
    const owner = serverUserIds();
    for (const path of [cluster.baseDir, cluster.socketDir, cluster.logFile]) chownSync(path, owner.uid, owner.gid);
  }
  return cluster;
}

function settingsAppend(cluster: PgCluster, settings: PgSettings): void {
  const lines = Object.entries(settings).map(([name, value]) => `${name} = ${settingValue(value)}`);
  if (lines.length === 0) return;
  const file = join(cluster.dataDir, 'postgresql.conf');
  writeFileSync(file, `\n# pidfence test harness\n${lines.join('\n')}\n`, { flag: 'a' });
}

function settingValue(value: string | number | boolean): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  return `'${value.replace(/'/g, "''")}'`;
}

async function clusterStopImmediate(cluster: PgCluster): Promise<void> {
  if (!clusterIsRunning(cluster)) return;
  await runServerCommand(
    cluster,
    'pg_ctl',
    ['stop', '-D', cluster.dataDir, '-m', 'immediate', '-w', '-t', String(STOP_TIMEOUT_S)],
    (STOP_TIMEOUT_S + 10) * 1_000,
  );
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function serverUserIds(): { uid: number; gid: number } {
  const result = spawnSync('getent', ['passwd', SERVER_OS_USER], { encoding: 'utf8' });
  const fields = (result.stdout ?? '').split(':');
  const uid = Number(fields[2]);
  const gid = Number(fields[3]);
  if (result.status !== 0 || !Number.isInteger(uid) || !Number.isInteger(gid)) {
    throw new PidfenceError(
      `running as root but there is no \`${SERVER_OS_USER}\` user to run PostgreSQL as: install the postgresql package or run tests as a normal user`,
      'ERR_PIDFENCE_TEST_PG_BINARIES',
    );
  }
  return { uid, gid };
}

/** The argv that runs a server binary: as `postgres` through runuser when root, else directly. */
function serverCommandArgv(cluster: PgCluster, binary: string, args: readonly string[]): [string, string[]] {
  const path = join(cluster.binaries.binDir, binary);
  return isRoot() ? ['runuser', ['-u', SERVER_OS_USER, '--', path, ...args]] : [path, [...args]];
}

/** Runs a server binary bounded in time; its own process group so a timeout kills everything it started. */
function runServerCommand(
  cluster: PgCluster,
  binary: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<CommandResult> {
  const [file, argv] = serverCommandArgv(cluster, binary, args);
  return new Promise((resolve) => {
    // cwd = baseDir: the postgres user may not be allowed into the caller's cwd (e.g. /root).
    const child = spawn(file, argv, { cwd: cluster.baseDir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    let timedOut = false;
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8_192);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    // Same tick as spawn: libuv cannot have reaped the child yet, so this pins the process we started
    // (detached: it leads its own group). A timeout signals that group through the proved pidfd only.
    const identity = child.pid === undefined ? null : captureIdentity(child.pid);
    const timer = setTimeout(() => {
      timedOut = true;
      // Any outcome but `signalled` means the group is already gone: nothing left to stop.
      if (identity !== null) signalVerified(identity, 'SIGKILL', { group: true });
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ exitCode: null, signal: null, output: `${output}\n${error.message}`, timedOut });
    });
    child.once('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ exitCode, signal, output, timedOut });
    });
  });
}

function commandSucceeded(result: CommandResult): boolean {
  return result.exitCode === 0 && !result.timedOut;
}

function commandError(
  code: string,
  what: string,
  result: CommandResult | undefined,
  cluster?: PgCluster,
): PidfenceError {
  const outcome =
    result === undefined
      ? 'not run'
      : result.timedOut
        ? 'timed out'
        : result.signal !== null
          ? `killed by ${result.signal}`
          : `exit ${String(result.exitCode)}`;
  const output = secretsRedact(result?.output.trim() ?? '');
  const log = cluster === undefined ? '' : serverLogTail(cluster);
  const parts = [`${what} (${outcome})`];
  if (output !== '') parts.push(`command output:\n${output}`);
  if (log !== '') parts.push(`server log tail (${cluster?.logFile ?? ''}):\n${log}`);
  return new PidfenceError(parts.join('\n'), code);
}

// ---------------------------------------------------------------------------------------------
// Cleanup on exit: a test that throws or a worker that is interrupted must not leave servers behind.

const liveClusters = new Set<PgCluster>();
let exitHooksInstalled = false;
const EXIT_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function liveClustersRegister(cluster: PgCluster): void {
  liveClusters.add(cluster);
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.once('exit', clusterRemoveAllSync);
  for (const signal of EXIT_SIGNALS) process.on(signal, onExitSignal);
}

function onExitSignal(signal: NodeJS.Signals): void {
  clusterRemoveAllSync();
  // If nobody else handles the signal, end the process the way the signal would have (shell
  // convention 128 + N) instead of re-raising it at our own PID.
  if (process.listenerCount(signal) === 1) process.exit(128 + (osConstants.signals[signal] ?? 0));
}

/** Synchronous last resort (exit handlers cannot await): immediate stop, then delete the dir. */
export function clusterRemoveAllSync(): void {
  for (const cluster of liveClusters) {
    if (clusterIsRunning(cluster)) {
      const [file, argv] = serverCommandArgv(cluster, 'pg_ctl', [
        'stop',
        '-D',
        cluster.dataDir,
        '-m',
        'immediate',
        '-w',
        '-t',
        '10',
      ]);
      spawnSync(file, argv, { cwd: cluster.baseDir, stdio: 'ignore', timeout: 15_000 });
    }
    rmSync(cluster.baseDir, { recursive: true, force: true });
  }
  liveClusters.clear();
}
