// A worker's tick against the control plane's worker lease (issue 29, docs/decisions/0430): a tick
// that is not below half the lease could let the session lapse between two lease pages, so the
// worker refuses it before it registers: a typed error, exit 2, no stack trace, nothing changed (no
// session, no journal). Real PostgreSQL, a `pidfence control-plane` and `pidfence worker` processes.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

import test from 'ava';

import { startWorker } from '../../lib/cluster/worker';
import { clusterFixture } from './world';
import { fleetWorld, type CliAnswer } from './fleet-world';

const ready = clusterFixture('cluster_worker_tick');

/** `pidfence worker ARGV` to its end (it must not start), with its exit code and output. */
function workerRun(argv: readonly string[]): Promise<CliAnswer> {
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { timeout: 30_000, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
    );
  });
}

async function sessionsOf(principal: string): Promise<number> {
  const { world } = await ready;
  const { rows } = await world.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM worker_sessions WHERE principal = $1',
    [principal],
  );
  return Number(rows[0]?.n);
}

test.serial(
  'cluster: `pidfence worker --tick` at half the worker lease is refused before it registers: ERR_PIDFENCE_WORKER_TICK_TOO_LONG, exit 2, no stack trace, no session, no journal',
  async (t) => {
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane(['--worker-lease', '2s']);
    const pem = fleet.certs.client('worker-tick');
    const journal = path.join(fleet.scratch, 'refused.db');
    const refused = await workerRun(fleet.workerArgv(url, pem, ['--tick', '1s', '--journal', journal]));
    t.is(refused.code, 2, refused.stderr);
    const [first = ''] = refused.stderr.split('\n');
    t.is(
      first,
      "pidfence: the worker's tick (--tick 1s) is not below half the control plane's worker lease (2s), so its session could lapse between two lease pages; give a --tick below 1s, or start the control plane with a --worker-lease above 2s. (ERR_PIDFENCE_WORKER_TICK_TOO_LONG)",
    );
    t.regex(refused.stderr, /^Usage: pidfence worker serve /m);
    t.notRegex(refused.stderr, /^\s+at /m, 'no stack trace');
    t.is(refused.stdout, '', 'never ready');
    t.false(existsSync(journal), 'no journal made');
    t.is(await sessionsOf('worker-tick'), 0, 'no session registered');

    // Just below half: it starts and registers.
    await fleet.worker(url, pem, ['--tick', '999ms', '--journal', journal]);
    t.true(existsSync(journal));
    t.is(await sessionsOf('worker-tick'), 1);
  },
);

test.serial('cluster: startWorker refuses a tick of half the worker lease with the same typed error', async (t) => {
  const { database } = await ready;
  const fleet = fleetWorld(t, database);
  const { url } = await fleet.plane(['--worker-lease', '3s']);
  const pem = fleet.certs.client('worker-tick-lib');
  const journalFile = path.join(fleet.scratch, 'lib.db');
  await t.throwsAsync(
    startWorker({
      controlPlaneUrls: [url],
      tls: { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert },
      journalFile,
      tickMs: 1_500,
    }),
    { code: 'ERR_PIDFENCE_WORKER_TICK_TOO_LONG', message: /give a --tick below 1\.5s/ },
  );
  t.false(existsSync(journalFile));
  t.is(await sessionsOf('worker-tick-lib'), 0);
});
