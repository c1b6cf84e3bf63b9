// `node dist/test/helpers/with-postgres.js <command> [args...]`: runs the command with a PostgreSQL
// server at PIDFENCE_TEST_DATABASE_URL, starting (and afterwards removing) a throw-away cluster when
// none answers there, so `npm test` passes on a fresh machine (design/architecture §7, docs/decisions/0004).
import { captureIdentity, signalVerified } from '../../lib/native/index';
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { delimiter, join } from 'node:path';

import { PidfenceError } from '../../lib/base/errors';
import { clusterInit, clusterRemove, clusterStart, clusterUrl, type PgCluster } from './pg-cluster';
import { DEFAULT_TEST_DATABASE_URL, serverAnswers, TEST_DATABASE_URL_ENV, testDatabaseUrl } from './postgres';

/** Tells the child (and the wrapper's own test) which temp dir the throw-away cluster lives in. */
export const TEST_CLUSTER_DIR_ENV = 'PIDFENCE_TEST_CLUSTER_DIR';
/** Tests only use the admin database to create their own; a fresh cluster's `postgres` serves (CREATE DATABASE test would cost 1-3 s here). */
const ADMIN_DATABASE = 'postgres';
/** Throw-away data on 2 shared cores: durability costs time and proves nothing here. */
const THROWAWAY_SETTINGS = { fsync: false, full_page_writes: false, synchronous_commit: false } as const;
const EXIT_USAGE = 2;
const EXIT_NO_SERVER = 1;

/** Signals that end a test run; the wrapper passes them on and cleans up after the child. */
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGHUP', 'SIGINT', 'SIGTERM'];

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined) {
    process.stderr.write('usage: node dist/test/helpers/with-postgres.js <command> [args...]\n');
    return EXIT_USAGE;
  }
  const url = testDatabaseUrl();
  if (await serverAnswers(url)) return commandRun(command, args, { [TEST_DATABASE_URL_ENV]: url });

  const cluster = await throwawayClusterStart(url);
  try {
    const clusterEnv = {
      [TEST_DATABASE_URL_ENV]: clusterUrl(cluster, ADMIN_DATABASE),
      [TEST_CLUSTER_DIR_ENV]: cluster.baseDir,
    };
    return await commandRun(command, args, clusterEnv);
  } finally {
    await clusterRemove(cluster);
  }
}

async function throwawayClusterStart(unansweredUrl: string): Promise<PgCluster> {
  const shownUrl = unansweredUrl === DEFAULT_TEST_DATABASE_URL ? 'the default URL' : TEST_DATABASE_URL_ENV;
  process.stderr.write(`with-postgres: no server answers at ${shownUrl}; starting a throw-away cluster\n`);
  const startedAt = Date.now();
  const cluster = await clusterInit({ label: 'with-postgres', settings: THROWAWAY_SETTINGS });
  try {
    await clusterStart(cluster);
  } catch (error) {
    await clusterRemove(cluster);
    throw error;
  }
  process.stderr.write(
    `with-postgres: cluster on 127.0.0.1:${String(cluster.port)} ready in ${Date.now() - startedAt} ms\n`,
  );
  return cluster;
}

/** Runs the command with inherited stdio; forwards termination signals; resolves to its exit code. */
function commandRun(
  command: string,
  args: readonly string[],
  extraEnv: Readonly<Record<string, string>>,
): Promise<number> {
  // `ava` is found whether or not we run under `npm run` (which puts node_modules/.bin on PATH).
  const packageBin = join(__dirname, '..', '..', '..', 'node_modules', '.bin');
  const env = { ...process.env, ...extraEnv, PATH: `${packageBin}${delimiter}${process.env['PATH'] ?? ''}` };
  return new Promise((resolve) => {
    const child = spawn(command, [...args], { stdio: 'inherit', env });
    // Captured in the spawn tick (the child cannot have been reaped yet): forwarded signals go
    // through the verified path like every other signal of this project, never a bare PID.
    const identity = child.pid === undefined ? null : captureIdentity(child.pid);
    const forward = (signal: NodeJS.Signals): void => {
      if (identity) signalVerified(identity, signal);
    };
    const signals = FORWARDED_SIGNALS;
    // Our own handlers keep us alive until the child is gone, so the cluster is removed after it.
    for (const signal of signals) process.on(signal, forward);
    const done = (code: number): void => {
      for (const signal of signals) process.removeListener(signal, forward);
      resolve(code);
    };
    child.once('error', (error) => {
      process.stderr.write(`with-postgres: cannot run ${command}: ${error.message}\n`);
      done(127);
    });
    // Shell convention: a child killed by signal N exits 128 + N.
    child.once('exit', (code, signal) => done(code ?? 128 + (signal === null ? 0 : constants.signals[signal])));
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const code = error instanceof PidfenceError ? ` [${error.code}]` : '';
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`with-postgres: ${message}${code}\n`);
    process.exit(EXIT_NO_SERVER);
  },
);
