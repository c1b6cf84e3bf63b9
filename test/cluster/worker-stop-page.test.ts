// The stops of one lease page become the worker's local cancel intents in one synced transaction
// (docs/decisions/0370): a real `pidfence worker` under strace, a real control plane and PostgreSQL. A
// project cancel brings the worker its N stops in one answer; between the cancel and the first TERM
// its journal's WAL is fsynced for one commit, not N (one per stop before 0370). Every job is still
// stopped after its intent is durable, and each run has one intent and one event, locally and in the
// control plane. A run whose intent the journal refuses is not signalled, and its stop comes again
// with the next answer once the journal takes it.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { spawnJob, type Job } from '../helpers/processes';
import { until } from '../helpers/wait';
import { driverOf } from '../../lib/store/sqlite/driver';
import { fleetWorld, markingJob, runOf, stopGently, type FleetWorld } from './fleet-world';
import { clusterFixture } from './world';

const ready = clusterFixture('cluster_worker_stop_page');
const PAGE_PROJECT = 'project-wsp';
const REFUSE_PROJECT = 'project-wsr';
const STOPS = 12;

interface TracedWorker {
  readonly job: Job;
  readonly journal: string;
  readonly log: string;
}

/** `pidfence worker` under strace (-f: its launchers too; -y: each fd with its path; -ttt: wall-clock seconds). */
/** An operator of `project` on this control plane. */
async function operatorOf(
  t: ExecutionContext,
  fleet: FleetWorld,
  url: string,
  project: string,
): Promise<ControlPlaneClient> {
  await fleet.grant(`op-${project}`, project, 'run.stop');
  await fleet.grant(`op-${project}`, project, 'run.read');
  const pem = fleet.certs.client(`op-${project}`);
  const operator = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert });
  t.teardown(() => operator.close());
  return operator;
}

async function submitAll(
  t: ExecutionContext,
  operator: ControlPlaneClient,
  projectId: string,
  jobs: ReadonlyMap<string, string[]>,
): Promise<void> {
  for (const [runId, argv] of jobs) {
    const reply = await operator.send('POST', '/v1/jobs', { projectId, runId, argv });
    t.is(reply.status, 200, JSON.stringify(reply.body));
  }
}

const cancelled = (operator: ControlPlaneClient, runId: string) =>
  until(async () => (await runOf<{ status: string }>(operator, runId)).status === 'cancelled', {
    timeoutMs: 60_000,
    what: `${runId} cancelled`,
  });

async function tracedWorker(t: ExecutionContext, fleet: FleetWorld, url: string): Promise<TracedWorker> {
  const pem = fleet.certs.client('worker-wsp');
  const journal = path.join(realpathSync(fleet.scratch), 'worker-wsp.db');
  const log = path.join(fleet.scratch, 'strace-worker.log');
  const job = spawnJob(t, 'strace', [
    '-f',
    '-y',
    '-qq',
    '-ttt',
    '-e',
    'trace=fsync,fdatasync,pidfd_send_signal',
    '-o',
    log,
    process.execPath,
    ...fleet.workerArgv(url, pem, ['--journal', journal, '--capacity', String(STOPS)]),
  ]);
  // SIGTERM to strace, the group's leader, is passed on to the worker, which drains and ends.
  t.teardown(() => stopGently(job));
  await job.waitForLine(/pidfence worker: ready/, 30_000);
  return { job, journal, log };
}

interface Traced {
  readonly atS: number;
  readonly line: string;
}

function tracedCalls(log: string): Traced[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const match = /^\d+\s+(\d+\.\d+)\s+\w+\(/.exec(line);
      return match === null ? [] : [{ atS: Number(match[1]), line }];
    });
}

/**
 * Synced commits of the journal between `fromS` and the first TERM after it: WAL fsyncs, less those
 * of checkpoints (a checkpoint fsyncs the WAL, then the database file).
 */
function syncedCommitsBeforeFirstTerm(calls: readonly Traced[], journal: string, fromS: number) {
  const after = calls.filter((call) => call.atS >= fromS);
  const firstTerm = after.findIndex((call) => /pidfd_send_signal\(.*SIGTERM/.test(call.line));
  const window = firstTerm < 0 ? [] : after.slice(0, firstTerm);
  const syncOf = (file: string) => {
    const pattern = new RegExp(
      `^\\d+\\s+\\S+\\s+f(?:data)?sync\\(\\d+<${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}>`,
    );
    return (call: Traced) => pattern.test(call.line);
  };
  const wal = window.filter(syncOf(`${journal}-wal`)).length;
  const database = window.filter(syncOf(journal)).length;
  return {
    firstTerm: firstTerm >= 0,
    commits: wal - database,
    terms: after.filter((call) => /pidfd_send_signal\(.*SIGTERM/.test(call.line)).length,
  };
}

test.serial(
  'cluster: a project cancel gives a worker its stops in one lease answer, and it writes their local cancel intents in one synced transaction before the first TERM; every job is stopped and each run has one intent and one event',
  async (t) => {
    t.timeout(180_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const operator = await operatorOf(t, fleet, url, PAGE_PROJECT);
    const worker = await tracedWorker(t, fleet, url);
    const runIds = Array.from({ length: STOPS }, (_, i) => `wsp-${i}`);
    const marker = (runId: string) => path.join(fleet.scratch, `${runId}.started`);
    await submitAll(
      t,
      operator,
      PAGE_PROJECT,
      new Map(runIds.map((id) => [id, ['sh', '-c', `echo > ${marker(id)}; exec sleep 60`]])),
    );
    await until(() => runIds.every((runId) => existsSync(marker(runId))), {
      timeoutMs: 60_000,
      what: 'every job started',
    });
    // The admissions' own synced commits (each attempt's `running`) are done well before the cancel.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const cancelAtS = Date.now() / 1_000;
    t.like(await operator.send('POST', `/v1/projects/${PAGE_PROJECT}/cancel`), { status: 200 });
    for (const runId of runIds) await cancelled(operator, runId);
    await stopGently(worker.job);
    const traced = syncedCommitsBeforeFirstTerm(tracedCalls(worker.log), worker.journal, cancelAtS);
    t.true(traced.firstTerm, 'the trace holds the TERMs');
    t.is(traced.commits, 1, `the page's ${STOPS} intents are one synced commit before the first TERM`);
    t.true(traced.terms >= STOPS, 'every job was TERMed');
    const local = openSqliteStore(worker.journal);
    t.teardown(() => local.close());
    for (const runId of runIds) {
      const events = (await local.runStore.listEvents(runId)).map((event) => event.type);
      t.is(events.filter((type) => type === 'run.cancel_requested').length, 1, `${runId}: one local intent event`);
      t.not((await local.runStore.getRun(runId))?.cancelRequestedAtMs, null);
      const remote = (await world.eventTypes(runId)).filter((type) => type === 'run.cancel_requested');
      t.is(remote.length, 1, `${runId}: one event in the control plane`);
    }
  },
);

test.serial(
  'cluster: a stop whose local intent the journal refuses is not signalled while its page mates are stopped, and the next answer brings it again once the journal takes it',
  async (t) => {
    t.timeout(180_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const operator = await operatorOf(t, fleet, url, REFUSE_PROJECT);
    const journal = path.join(fleet.scratch, 'worker-refuse.db');
    // The journal, before the worker opens it, refuses the intent of one run: a real SQLite refusal.
    const reader = openSqliteStore(journal);
    t.teardown(() => reader.close());
    const refused = `${REFUSE_PROJECT}-r1`;
    driverOf(reader.database).exec(
      `CREATE TRIGGER test_refuse_intent BEFORE UPDATE OF cancel_requested_at_ms ON runs
       WHEN NEW.id = '${refused}' AND NEW.cancel_requested_at_ms IS NOT NULL
       BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`,
    );
    await fleet.worker(url, fleet.certs.client('worker-refuse'), ['--journal', journal, '--capacity', '3']);
    const runIds = [0, 1, 2].map((i) => `${REFUSE_PROJECT}-r${i}`);
    const term = (runId: string) => path.join(fleet.scratch, `${runId}.term`);
    await submitAll(t, operator, REFUSE_PROJECT, new Map(runIds.map((id) => [id, markingJob(term(id))])));
    const local = async (id: string) => (await reader.runStore.getRun(id))?.status;
    for (const id of runIds) await until(async () => (await local(id)) === 'running', { timeoutMs: 60_000, what: id });
    // Each job's TERM trap is set once its shell runs.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    t.like(await operator.send('POST', `/v1/projects/${REFUSE_PROJECT}/cancel`), { status: 200 });
    for (const runId of runIds.filter((id) => id !== refused)) await cancelled(operator, runId);
    // Several more answers (200 ms ticks) while the journal still refuses: no intent, no signal.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    t.false(existsSync(term(refused)), 'no TERM without a durable intent');
    t.is((await reader.runStore.getRun(refused))?.cancelRequestedAtMs, null);
    t.is((await runOf<{ status: string }>(operator, refused)).status, 'running');
    driverOf(reader.database).exec('DROP TRIGGER test_refuse_intent');
    await cancelled(operator, refused);
    t.is(readFileSync(term(refused), 'utf8').trim(), 'term', 'stopped through TERM once its intent was durable');
    for (const runId of runIds) {
      const local = (await reader.runStore.listEvents(runId)).filter((event) => event.type === 'run.cancel_requested');
      t.is(local.length, 1, `${runId}: one local intent event`);
      const remote = (await world.eventTypes(runId)).filter((type) => type === 'run.cancel_requested');
      t.is(remote.length, 1, `${runId}: one event in the control plane`);
    }
  },
);
