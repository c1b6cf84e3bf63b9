// A run is terminal only when its end is proven (issue 30 items 1-3; docs/decisions/0270-0273): a
// worker killed -9 leaves its run `unreachable`, not failed; a cancel sent meanwhile is taken and
// delivered the moment the restarted worker re-attaches; `pidfence worker forget` ends the run as
// `forgotten` and refuses the worker's late report; a control plane stalled longer than a lease costs
// no healthy job, while a job that opted in stops. Real PostgreSQL, HTTPS, worker and job processes.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { signalVerified } from '../../lib/native/index';
import type { Pem } from '../helpers/certificates';
import type { Job } from '../helpers/processes';
import { clusterFixture } from './world';
import { fleetWorld, killNine, markingJob, runOf as runOfAny, type FleetWorld } from './fleet-world';
import { delay, until } from '../helpers/wait';

const ready = clusterFixture('cluster_unreachable');
const PROJECT = 'project-ur';

interface RunView {
  readonly status: string;
  readonly unreachableSinceMs?: number;
  readonly exit: { readonly cause: string } | null;
  readonly events: ReadonlyArray<{ readonly type: string }>;
  readonly dispatch: { readonly dispatchCount: number } | null;
}

function clientOf(t: ExecutionContext, world: FleetWorld, url: string, pem: Pem): ControlPlaneClient {
  const client = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: world.certs.ca.cert });
  t.teardown(() => client.close());
  return client;
}

const runOf = (client: ControlPlaneClient, runId: string): Promise<RunView> => runOfAny<RunView>(client, runId);

async function setUp(t: ExecutionContext, planeArgs: readonly string[] = ['--worker-lease', '2s']) {
  const { database, world } = await ready;
  const fleet = fleetWorld(t, database);
  const { job: planeJob, url } = await fleet.plane(planeArgs);
  await fleet.grant(`op-${t.title.length}`, PROJECT, 'run.stop');
  await fleet.grant(`op-${t.title.length}`, PROJECT, 'run.read');
  const operator = clientOf(t, fleet, url, fleet.certs.client(`op-${t.title.length}`));
  return { database, world, fleet, planeJob, url, operator };
}

test.serial(
  'cluster gate 20: a worker killed -9 leaves its run unreachable (not failed, the job runs on); a cancel is taken meanwhile; restarted on its journal the worker re-attaches, the stop reaches the job at once and the end is reported with its receipt',
  async (t) => {
    t.timeout(120_000);
    const { fleet, url, operator } = await setUp(t);
    const pem = fleet.certs.client('worker-ur');
    const journal = path.join(fleet.scratch, 'worker-ur.db');
    const marker = path.join(fleet.scratch, 'ur-term');
    const first = await fleet.worker(url, pem, ['--journal', journal]);
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'ur-1', projectId: PROJECT, argv: markingJob(marker) }), {
      status: 200,
    });
    await until(async () => (await runOf(operator, 'ur-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'the run running',
    });
    await delay(1_000);

    await killNine(first);
    await until(async () => (await runOf(operator, 'ur-1')).status === 'unreachable', {
      timeoutMs: 20_000,
      what: 'the run unreachable',
    });
    const away = await runOf(operator, 'ur-1');
    t.is(away.exit, null, 'not ended: nobody proved its end');
    t.true(away.events.some((event) => event.type === 'run.unreachable'));
    t.true(typeof away.unreachableSinceMs === 'number');
    const card = await operator.send<{ unreachable: number }>('GET', `/v1/projects/${PROJECT}/status`);
    t.is(card.body.unreachable, 1, 'counted on the status card');

    const cancelled = await operator.send<{ result: string }>('POST', '/v1/runs/ur-1/cancel', {});
    t.like(cancelled, { status: 200, body: { result: 'requested' } }, 'an unreachable run still takes a cancel');
    await delay(3_000);
    t.false(existsSync(marker), 'nothing stopped the job while its worker was away');
    t.is((await runOf(operator, 'ur-1')).status, 'unreachable');

    await fleet.worker(url, pem, ['--journal', journal]);
    await until(() => existsSync(marker), { timeoutMs: 20_000, what: 'the job told to stop' });
    t.is(readFileSync(marker, 'utf8').trim(), 'term');
    await until(async () => (await runOf(operator, 'ur-1')).status === 'cancelled', {
      timeoutMs: 20_000,
      what: 'the run cancelled',
    });
    const ended = await runOf(operator, 'ur-1');
    t.is(ended.exit?.cause, 'receipt', "the end is proved by the job's receipt");
    t.is(ended.dispatch?.dispatchCount, 1, 'the stop was delivered once');
    t.true(ended.events.some((event) => event.type === 'run.reattached'));
    // The worker's own journal: the adoption names what it proved of the old worker process, not of the job.
    const local = await fleet.cli(pem, ['show', 'ur-1', '--db', journal, '--json']);
    t.is(local.code, 0, local.stderr);
    const adopted = (
      JSON.parse(local.stdout) as {
        attempts: Array<{ events: Array<{ type: string; detail: Record<string, unknown> }> }>;
      }
    ).attempts[0]?.events.find((event) => event.type === 'attempt.adopted');
    t.deepEqual(adopted?.detail, { runner: 'exited' }, 'no `proof=exited` beside a job that was alive');
  },
);

test.serial(
  'cluster gate 21: `pidfence worker forget` ends an unreachable run failed with cause forgotten, audited; the worker back a moment later is refused (ERR_PIDFENCE_WORKER_FORGOTTEN), stops the job, and nothing is rewritten',
  async (t) => {
    t.timeout(120_000);
    const { database, fleet, url, operator } = await setUp(t);
    const admin = fleet.certs.client('fleet-admin-fg');
    await fleet.grant('fleet-admin-fg', '@cluster', 'worker.manage');
    const pem = fleet.certs.client('worker-fg');
    const journal = path.join(fleet.scratch, 'worker-fg.db');
    const marker = path.join(fleet.scratch, 'fg-term');
    const first = await fleet.worker(url, pem, ['--journal', journal]);
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'fg-1', projectId: PROJECT, argv: markingJob(marker) }), {
      status: 200,
    });
    await until(async () => (await runOf(operator, 'fg-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'the run running',
    });
    await delay(1_000);
    await killNine(first);
    await until(async () => (await runOf(operator, 'fg-1')).status === 'unreachable', {
      timeoutMs: 20_000,
      what: 'the run unreachable',
    });

    const forgot = await fleet.cli(admin, ['worker', 'forget', 'worker-fg', '--control-plane', url]);
    t.is(forgot.code, 0, forgot.stderr);
    t.regex(forgot.stdout, /worker worker-fg: forgotten \(forget: done\); 1 run\(s\) ended failed, cause forgotten/);
    const forgotten = await runOf(operator, 'fg-1');
    t.is(forgotten.status, 'failed');
    t.is(forgotten.exit?.cause, 'forgotten', 'the record says the operator ended it, not a proof');
    const audit = await database.owner.query('SELECT action, actor, outcome FROM worker_audit WHERE worker_name = $1', [
      'worker-fg',
    ]);
    t.deepEqual(audit.rows, [{ action: 'forget', actor: 'fleet-admin-fg', outcome: 'changed' }]);
    const before = await database.owner.query('SELECT status, version, updated_at_ms FROM runs WHERE id = $1', [
      'fg-1',
    ]);

    // Back a moment later: its re-attach is refused, typed, and it stops the job the operator declared gone.
    const back = await fleet.worker(url, pem, ['--journal', journal]);
    await until(() => existsSync(marker), { timeoutMs: 20_000, what: 'the forgotten job stopped by its worker' });
    await delay(1_500);
    t.deepEqual(
      (await database.owner.query('SELECT status, version, updated_at_ms FROM runs WHERE id = $1', ['fg-1'])).rows,
      before.rows,
      'nothing rewritten',
    );
    t.is(back.child.exitCode, null);

    // A late report under the old lease, sent by hand: refused with the typed reason.
    const [lease] = (
      await database.owner.query<{ attemptId: string; fence: string; sessionId: string }>(
        'SELECT attempt_id AS "attemptId", fence, session_id AS "sessionId" FROM run_dispatch_leases WHERE run_id = $1',
        ['fg-1'],
      )
    ).rows;
    const worker = clientOf(t, fleet, url, pem);
    const late = await worker.send<{ code: string }>('POST', '/v1/completions', {
      sessionId: lease?.sessionId,
      runId: 'fg-1',
      attemptId: lease?.attemptId,
      fence: Number(lease?.fence),
      status: 'succeeded',
      cause: 'receipt',
      exit: { exitCode: 0, signal: null },
    });
    t.like(late, { status: 409, body: { code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' } });
    t.deepEqual(
      (await database.owner.query('SELECT status, version, updated_at_ms FROM runs WHERE id = $1', ['fg-1'])).rows,
      before.rows,
      'nothing rewritten by the late report',
    );
  },
);

/** Stalls the control plane process (SIGSTOP) for `ms`, then lets it go on. */
async function stall(planeJob: Job, ms: number, during: () => Promise<void> = async () => undefined): Promise<void> {
  signalVerified(planeJob.identity, 'SIGSTOP', { group: false });
  const started = Date.now();
  try {
    await during();
    await delay(Math.max(0, ms - (Date.now() - started)));
  } finally {
    signalVerified(planeJob.identity, 'SIGCONT', { group: false });
  }
}

test.serial(
  'cluster gate 22: a control plane stalled (SIGSTOP) for 2.5 leases leaves a healthy job running: its worker renews after the stall and is not told lost',
  async (t) => {
    t.timeout(120_000);
    const { fleet, url, operator, planeJob } = await setUp(t);
    const healthy = path.join(fleet.scratch, 'st-healthy');
    await fleet.worker(url, fleet.certs.client('worker-st'));
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'st-1', projectId: PROJECT, argv: markingJob(healthy) }), {
      status: 200,
    });
    await until(async () => (await runOf(operator, 'st-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'st-1 running',
    });
    await delay(1_000);
    await stall(planeJob, 5_000);
    await delay(4_000);
    t.false(existsSync(healthy), 'the healthy job was not stopped after the stall');
    await until(async () => (await runOf(operator, 'st-1')).status === 'running', {
      timeoutMs: 15_000,
      what: 'st-1 renewed after the stall',
    });
    t.false(existsSync(healthy));
  },
);

test.serial(
  'cluster gate 23: a job that opted in with stopAfterDisconnectMs is stopped by its worker while the control plane does not answer (monotonic clock), and its end is reported after',
  async (t) => {
    t.timeout(120_000);
    const { fleet, url, operator, planeJob } = await setUp(t);
    const optedIn = path.join(fleet.scratch, 'st-opted');
    await fleet.worker(url, fleet.certs.client('worker-so'));
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'st-2',
        projectId: PROJECT,
        argv: markingJob(optedIn),
        stopAfterDisconnectMs: 1_500,
      }),
      { status: 200 },
    );
    await until(async () => (await runOf(operator, 'st-2')).status === 'running', {
      timeoutMs: 20_000,
      what: 'st-2 running',
    });
    await delay(1_000);
    t.false(existsSync(optedIn), 'answered renewals keep it running');
    await stall(planeJob, 5_000, () =>
      until(() => existsSync(optedIn), {
        timeoutMs: 15_000,
        what: 'the opted-in job stopped while the control plane is away',
      }).then(() => undefined),
    );
    t.is(readFileSync(optedIn, 'utf8').trim(), 'term');
    // Right after the stall the run may show `unreachable` until the worker's next tick: wait for its end.
    await until(async () => !['running', 'unreachable'].includes((await runOf(operator, 'st-2')).status), {
      timeoutMs: 20_000,
      what: 'st-2 reported',
    });
    t.like(await runOf(operator, 'st-2'), { status: 'cancelled' });
  },
);

test.serial(
  "cluster gate 24: a worker's shutdown drain (SIGTERM) stops its job with durable shutdown intent first and reports its end before its session ends (lifecycle gate 4 on a worker)",
  async (t) => {
    t.timeout(120_000);
    const { database, fleet, url, operator } = await setUp(t);
    const marker = path.join(fleet.scratch, 'dr-term');
    const journal = path.join(fleet.scratch, 'worker-dr.db');
    const worker = await fleet.worker(url, fleet.certs.client('worker-dr'), ['--journal', journal]);
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'dr-1', projectId: PROJECT, argv: markingJob(marker) }), {
      status: 200,
    });
    await until(async () => (await runOf(operator, 'dr-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'dr-1 running',
    });
    await delay(1_000);
    signalVerified(worker.identity, 'SIGTERM', { group: false });
    await worker.exited;
    t.true(worker.lines.includes('pidfence worker: drained'));
    t.is(readFileSync(marker, 'utf8').trim(), 'term');
    // No wait: the end was reported before the worker process ended.
    const ended = await runOf(operator, 'dr-1');
    t.is(ended.status, 'cancelled');
    t.is(ended.exit?.cause, 'receipt');
    const local = await fleet.cli(fleet.certs.client('worker-dr'), ['show', 'dr-1', '--db', journal, '--json']);
    const localEvents = (
      JSON.parse(local.stdout) as { events: Array<{ type: string; detail: Record<string, unknown> }> }
    ).events;
    t.deepEqual(
      localEvents.find((event) => event.type === 'run.cancel_requested')?.detail.reason,
      'shutdown',
      'shutdown intent journaled first',
    );
    const [session] = (
      await database.owner.query(
        'SELECT s.ended_at_ms IS NOT NULL AS ended, l.released_at_ms IS NOT NULL AS released FROM run_dispatch_leases l JOIN worker_sessions s ON s.id = l.session_id WHERE l.run_id = $1',
        ['dr-1'],
      )
    ).rows;
    t.deepEqual(session, { ended: true, released: true });
  },
);

test.serial(
  'cluster gate 25: a task deadline that passes while the worker is down is delivered on its re-attach; the run ends timed_out with its receipt, once, and no run cancel is written (lifecycle gates 2 and 6 on a worker)',
  async (t) => {
    t.timeout(120_000);
    const { world, fleet, url, operator } = await setUp(t);
    const pem = fleet.certs.client('worker-dl');
    const journal = path.join(fleet.scratch, 'worker-dl.db');
    const marker = path.join(fleet.scratch, 'dl-term');
    const first = await fleet.worker(url, pem, ['--journal', journal]);
    t.like(
      await operator.send('POST', '/v1/jobs', {
        runId: 'dl-1',
        projectId: PROJECT,
        argv: markingJob(marker),
        timeoutMs: 6_000,
      }),
      { status: 200 },
    );
    await until(async () => (await runOf(operator, 'dl-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'dl-1 running',
    });
    await delay(1_000);
    await killNine(first);
    await until(async () => (await runOf(operator, 'dl-1')).status === 'unreachable', {
      timeoutMs: 20_000,
      what: 'dl-1 unreachable',
    });
    await delay(6_000);
    t.false(existsSync(marker), 'the deadline passed while nobody could stop the job');
    await fleet.worker(url, pem, ['--journal', journal]);
    let seen = '';
    await until(async () => (seen = (await runOf(operator, 'dl-1')).status) === 'timed_out', {
      timeoutMs: 20_000,
      what: 'dl-1 timed out',
    }).catch((error: unknown) => {
      t.log(`last status ${seen}; marker ${existsSync(marker)}`);
      throw error;
    });
    t.is(readFileSync(marker, 'utf8').trim(), 'term');
    t.is((await runOf(operator, 'dl-1')).exit?.cause, 'receipt');
    t.is(
      (await world.runStore.getRun('dl-1'))?.cancelRequestedAtMs,
      null,
      'a task timeout writes no run cancel intent',
    );
  },
);
