// design/dispatch §6 gate 13 end to end (docs/decisions/0103): two `pidfence control-plane` processes on one
// PostgreSQL and two `pidfence worker` processes, mutual TLS with certificates made by openssl. A
// run-level stop reaches the job only after its dispatch settled (one run.cancel_dispatched, whichever
// replica each tick reaches; strict alternation is replicas.test's); a task timeout stops the job with no run
// cancellation fact; a worker SIGKILLed mid-job loses its lease and its run does not stay running.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { signalVerified } from '../../lib/native/index';
import { PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { CLI, grantCancelOnSqlite } from '../execution/cli-runs';
import { spawnJob, type Job } from '../helpers/processes';
import { makeCertificates, tlsFlags } from '../helpers/certificates';
import { clusterFixture } from './world';
import { delay, until } from '../helpers/wait';

const ready = clusterFixture('cluster_gate13');

/**
 * A job that records TERM in `marker` and exits. It ends by itself only after about two minutes, so a
 * test that fails after SIGKILLing its worker leaves no job behind for long.
 */
function markingJob(marker: string): string[] {
  return [
    'sh',
    '-c',
    `echo job-started; trap 'echo term > ${marker}; exit 143' TERM; i=0; while [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
}

/** The project the worker's local journal recorded for `runId` (the journal is closed again at once). */
async function journalProjectOf(journal: string, runId: string): Promise<string | undefined> {
  const store = openSqliteStore(journal);
  const run = await store.runStore.getRun(runId).finally(() => store.close());
  return run?.projectId;
}

function terminate(job: Job): Promise<unknown> {
  signalVerified(job.identity, 'SIGTERM', { group: false });
  return job.exited;
}

test.serial(
  "gate 13: two control planes and two workers: a cancel is settled before the stop reaches the job, once; a task timeout writes no run cancellation; a killed worker's run does not stay running",
  async (t) => {
    t.timeout(120_000);
    const { database, world } = await ready;
    const certs = makeCertificates();
    const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-gate13-'));
    t.teardown(() => {
      certs.remove();
      rmSync(scratch, { recursive: true, force: true });
    });
    const operatorPem = certs.client('operator-13');
    // A cancel needs run.read (seeing the run) and run.stop, over HTTP as from the CLI (docs/decisions/0043, 0224).
    for (const permission of ['run.read', 'run.stop'] as const)
      await new PostgresGrantAdministration(database.owner).writeGrant(
        { subject: 'operator-13', projectId: 'project-13', permission },
        'test-owner',
      );

    const planes = [0, 1].map((i) =>
      spawnJob(t, process.execPath, [
        CLI,
        'control-plane',
        '--db',
        database.runtimeUrl,
        ...tlsFlags(certs.server, certs.ca),
        '--port',
        '0',
        '--worker-lease',
        '2s',
        '--replica-id',
        `cp-${i}`,
      ]),
    );
    const urls = await Promise.all(
      planes.map(
        async (plane) =>
          (/listening on (\S+)/.exec(await plane.waitForLine(/listening on/, 20_000)) ?? [])[1] as string,
      ),
    );
    const workers = [0, 1].map((i) => {
      const pem = certs.client(`worker-${i}`);
      return spawnJob(t, process.execPath, [
        CLI,
        'worker',
        '--control-plane',
        ...urls,
        ...tlsFlags(pem, certs.ca),
        '--journal',
        path.join(scratch, `worker-${i}.db`),
        '--tick',
        '200ms',
        '--grace',
        '2s',
      ]);
    });
    await Promise.all(workers.map((worker) => worker.waitForLine(/pidfence worker: ready/, 20_000)));
    const operator = new ControlPlaneClient(urls[0] as string, {
      cert: operatorPem.cert,
      key: operatorPem.key,
      ca: certs.ca.cert,
    });
    t.teardown(() => operator.close());

    const marker = (runId: string) => path.join(scratch, `${runId}.term`);
    for (const runId of ['g13-cancel-1', 'g13-cancel-2', 'g13-keep']) {
      t.like(
        await operator.send('POST', '/v1/jobs', { runId, projectId: 'project-13', argv: markingJob(marker(runId)) }),
        { status: 200 },
      );
    }
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'g13-timeout',
        projectId: 'project-13',
        argv: markingJob(marker('g13-timeout')),
        timeoutMs: 1_500,
      }),
      { status: 200 },
    );
    const statusOf = async (runId: string) => (await world.runStore.getRun(runId))?.status;
    for (const runId of ['g13-cancel-1', 'g13-cancel-2', 'g13-keep'])
      await until(async () => (await statusOf(runId)) === 'running', {
        what: `${runId} running`,
        timeoutMs: 20_000,
        intervalMs: 100,
      });
    await delay(500); // every job has been admitted locally and ticks at least once

    for (const runId of ['g13-cancel-1', 'g13-cancel-2'])
      t.like(await operator.send('POST', `/v1/runs/${runId}/cancel`), { status: 200, body: { result: 'requested' } });
    for (const runId of ['g13-cancel-1', 'g13-cancel-2', 'g13-timeout']) {
      await until(async () => ['cancelled', 'timed_out'].includes((await statusOf(runId)) ?? ''), {
        what: `${runId} ended`,
        timeoutMs: 20_000,
        intervalMs: 100,
      });
    }
    for (const runId of ['g13-cancel-1', 'g13-cancel-2']) {
      t.is(await statusOf(runId), 'cancelled');
      t.true(existsSync(marker(runId)), `${runId}: the job received TERM on its worker`);
      const types = await world.eventTypes(runId);
      t.deepEqual(
        types,
        ['run.cancel_requested', 'run.cancel_dispatched', 'run.terminal'],
        `${runId}: one settled dispatch before the end`,
      );
      t.like(
        await new (await import('../../lib/store/postgres/index')).PostgresDispatchRepository(world.pool).getRecord(
          runId,
        ),
        { status: 'dispatched', lastResult: 'termination_requested', dispatchCount: 1 },
      );
    }
    t.is(await statusOf('g13-timeout'), 'timed_out');
    t.true(existsSync(marker('g13-timeout')));
    t.is(
      (await world.runStore.getRun('g13-timeout'))?.cancelRequestedAtMs,
      null,
      'a task timeout writes no run cancel intent',
    );
    t.deepEqual(await world.eventTypes('g13-timeout'), ['run.terminal']);
    t.is(await statusOf('g13-keep'), 'running');
    t.false(existsSync(marker('g13-keep')));

    // SIGKILL the worker that holds g13-keep: its lease expires and the run is marked unreachable, not
    // ended (docs/decisions/0270): nobody proved its end, and the job does outlive its worker.
    const [holder] = (
      await database.owner.query<{ principal: string }>(
        'SELECT s.principal FROM run_dispatch_leases l JOIN worker_sessions s ON s.id = l.session_id WHERE l.run_id = $1',
        ['g13-keep'],
      )
    ).rows;
    const killed = workers[holder?.principal === 'worker-0' ? 0 : 1] as Job;
    signalVerified(killed.identity, 'SIGKILL', { group: false });
    await killed.exited;
    const unreachable = async () =>
      (
        await database.owner.query(
          'SELECT 1 FROM run_dispatch_leases WHERE run_id = $1 AND unreachable_at_ms IS NOT NULL',
          ['g13-keep'],
        )
      ).rows.length === 1;
    await until(unreachable, {
      what: 'g13-keep unreachable after its lease expired',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.is(await statusOf('g13-keep'), 'running', "active: it ends on its worker's proof or an operator's forget");
    t.deepEqual(await world.eventTypes('g13-keep'), ['run.unreachable']);
    // The job itself outlived its worker; on that host the local recovery path stops it (docs/decisions/0070).
    const killedJournal = path.join(scratch, `worker-${killed === workers[0] ? 0 : 1}.db`);
    // The journal keeps the run's own project (docs/decisions/0104): the local operator's grant names it.
    t.is(await journalProjectOf(killedJournal, 'g13-keep'), 'project-13');
    await grantCancelOnSqlite(killedJournal, 'project-13'); // cancel needs run.stop on that journal
    const cancelled = spawnSync(process.execPath, [CLI, 'cancel', 'g13-keep', '--db', killedJournal], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    t.is(cancelled.status, 0, cancelled.stderr);
    t.regex(cancelled.stdout, /stopped the job itself/);
    t.true(existsSync(marker('g13-keep')));
    // The worker's job kept its output beside the journal (docs/decisions/0250), read as on any SQLite store.
    const logged = spawnSync(process.execPath, [CLI, 'logs', 'g13-keep', '--db', killedJournal], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    t.is(logged.status, 0, logged.stderr);
    t.true(logged.stdout.startsWith('job-started\n'), logged.stdout); // then what its shell said when TERM came

    const survivors = workers.filter((worker) => worker !== killed);
    await Promise.all([...survivors, ...planes].map(terminate));
    for (const plane of planes) t.true(plane.lines.includes('pidfence control-plane: closed'));
  },
);
