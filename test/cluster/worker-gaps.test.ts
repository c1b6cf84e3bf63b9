// Issue 30's remaining worker gaps (docs/decisions/0360-0362): a worker killed between the pull's
// answer and its lease journal leaves no run waiting for an operator; a worker killed right after a
// pull still gets its job's deadline stop after a restart; and a worker keeps a bounded number of
// timers whatever it holds. Real PostgreSQL, HTTPS, control-plane, worker and job processes.
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { LeaseJournal } from '../../lib/cluster/lease-journal';
import { startWorker } from '../../lib/cluster/worker';
import { PostgresExecutionStore } from '../../lib/store/postgres/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { timerCensus, type TimerCensus } from '../helpers/timer-census';
import { clusterFixture } from './world';
import { fleetWorld, killNine, runOf as runOfAny } from './fleet-world';
import { delay, until } from '../helpers/wait';

const ready = clusterFixture('cluster_worker_gaps');
const PROJECT = 'project-wg';

interface RunView {
  readonly status: string;
  readonly exit: { readonly cause: string } | null;
}

const runOf = (client: ControlPlaneClient, runId: string): Promise<RunView> => runOfAny<RunView>(client, runId);

/** A job that writes `started` first, then `term` to `marker` on TERM; it ends by itself after about a minute. */
function startedJob(started: string, marker: string): string[] {
  return [
    'sh',
    '-c',
    `trap 'echo term > ${marker}; exit 143' TERM; echo > ${started}; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`,
  ];
}

async function setUp(t: ExecutionContext, prefix: string) {
  const { database, world } = await ready;
  const fleet = fleetWorld(t, database);
  const { job: planeJob, url } = await fleet.plane(['--worker-lease', '2s']);
  const name = `op-${prefix}`;
  await fleet.grant(name, PROJECT, 'run.stop');
  await fleet.grant(name, PROJECT, 'run.read');
  const pem = fleet.certs.client(name);
  const operator = new ControlPlaneClient(url, { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert });
  t.teardown(() => operator.close());
  return { database, world, fleet, planeJob, url, operator };
}

async function submit(operator: ControlPlaneClient, body: Record<string, unknown>): Promise<void> {
  const reply = await operator.send('POST', '/v1/jobs', { projectId: PROJECT, ...body });
  if (reply.status !== 200) throw new Error(`POST job: ${reply.status} ${JSON.stringify(reply.body)}`);
}

/** Waits for a terminal state and returns the run. */
async function ended(operator: ControlPlaneClient, runId: string, timeoutMs = 30_000): Promise<RunView> {
  let last: RunView | undefined;
  await until(
    async () => !['queued', 'running', 'unreachable'].includes((last = await runOf(operator, runId)).status),
    {
      timeoutMs,
      what: `${runId} ended`,
    },
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; last ${JSON.stringify(last)}`);
  });
  return last as RunView;
}

test.serial(
  "cluster: settling an earlier session ends each run it still holds failed with cause never_started and ends the session; another name's session, or one's own current session, is refused and nothing changes",
  async (t) => {
    const { world } = await ready;
    const { caller, ref } = await world.assigned();
    const later = { principal: caller.principal, sessionId: await world.leases.registerSession(caller.principal) };
    const stranger = { principal: 'CN=worker-other', sessionId: await world.leases.registerSession('CN=worker-other') };
    await t.throwsAsync(world.leases.settleEarlierSession(stranger, caller.sessionId), {
      code: 'ERR_PIDFENCE_CLUSTER_SESSION_NOT_YOURS',
    });
    await t.throwsAsync(world.leases.settleEarlierSession(later, later.sessionId), {
      code: 'ERR_PIDFENCE_CLUSTER_SESSION_NOT_YOURS',
    });
    t.is((await world.runStore.getRun(ref.runId))?.status, 'running', 'nothing changed');
    t.deepEqual(await world.leases.settleEarlierSession(later, caller.sessionId), { neverStarted: 1 });
    const run = await world.runStore.getRun(ref.runId);
    t.is(run?.status, 'failed');
    t.deepEqual(await world.leases.settleEarlierSession(later, caller.sessionId), { neverStarted: 0 }, 'a retry');
    t.like(
      await world.leases.pullPage(caller, 1),
      { kind: 'session_closed' },
      'the earlier session pulls nothing more',
    );
    const late = await world.leases.complete(caller, { ...ref, status: 'succeeded', cause: 'receipt', exit: null });
    t.not(late.kind, 'completed', 'a late report rewrites nothing');
    t.like(await world.runStore.getRun(ref.runId), { status: 'failed', version: run?.version });
  },
);

/** The cause of the run's terminal attempt, from its `attempt.terminal` event. */
async function causeOf(runId: string, attemptId: string): Promise<unknown> {
  const { world } = await ready;
  const events = await new PostgresExecutionStore(world.pool).listAttemptEvents(runId, attemptId);
  return (events.find((event) => event.type === 'attempt.terminal')?.payload as { cause?: unknown } | undefined)?.cause;
}

test.serial(
  "cluster: a run never started under a durable cancel intent ends as the intent says, cause never_started: settling an earlier session ends it cancelled (an operator's cancel) or timed_out (a timeout), and so does a worker's own never_started report",
  async (t) => {
    const { world } = await ready;
    const cancelled = await world.assigned();
    const timedOut = await world.assigned();
    await world.cancel(cancelled.ref.runId);
    const timeout = await world.runStore.requestCancellation({
      runId: timedOut.ref.runId,
      reason: 'timeout',
      eventId: `evt-${randomUUID()}`,
    });
    t.is(timeout.kind, 'requested');
    const later = {
      principal: cancelled.caller.principal,
      sessionId: await world.leases.registerSession(cancelled.caller.principal),
    };
    t.deepEqual(await world.leases.settleEarlierSession(later, cancelled.caller.sessionId), { neverStarted: 1 });
    t.deepEqual(await world.leases.settleEarlierSession(later, timedOut.caller.sessionId), { neverStarted: 1 });
    t.is((await world.runStore.getRun(cancelled.ref.runId))?.status, 'cancelled');
    t.is(await causeOf(cancelled.ref.runId, cancelled.ref.attemptId), 'never_started');
    t.is((await world.runStore.getRun(timedOut.ref.runId))?.status, 'timed_out');
    t.is(await causeOf(timedOut.ref.runId, timedOut.ref.attemptId), 'never_started');

    // A live worker's report of a lease it never received, or of an admission that failed (docs/decisions/0434).
    const reported = await world.assigned();
    await world.cancel(reported.ref.runId);
    t.deepEqual(
      await world.leases.completePage(reported.caller, [
        { ...reported.ref, status: 'failed', cause: 'never_started', exit: null },
      ]),
      [{ runId: reported.ref.runId, kind: 'completed' }],
    );
    t.is((await world.runStore.getRun(reported.ref.runId))?.status, 'cancelled');
    t.is(await causeOf(reported.ref.runId, reported.ref.attemptId), 'never_started');
  },
);

const FREEZE = path.resolve(__dirname, '..', 'helpers', 'open-freeze.js');

test.serial(
  "cluster gate 27: a worker killed -9 between the pull's answer and its lease journal leaves no run for an operator: restarted on its journal it proves that run never started (failed, cause never_started), the job never ran, and a job it did journal is re-attached and runs on",
  async (t) => {
    t.timeout(120_000);
    const { database, fleet, url, operator } = await setUp(t, 'ns');
    const pem = fleet.certs.client('worker-ns');
    const journal = path.join(fleet.scratch, 'worker-ns.db');
    const frozen = path.join(fleet.scratch, 'frozen');
    const first = await fleet.worker(url, pem, ['--journal', journal], {
      options: ['--require', FREEZE],
      env: { PIDFENCE_TEST_FREEZE_OPEN: '[.]leases/ns-2[.]json[.]tmp$', PIDFENCE_TEST_FREEZE_MARKER: frozen },
    });
    // One run journaled and running, then the one whose lease the worker is writing when it dies.
    const kept = { started: path.join(fleet.scratch, 'ns-1-started'), marker: path.join(fleet.scratch, 'ns-1-term') };
    await submit(operator, { runId: 'ns-1', argv: startedJob(kept.started, kept.marker) });
    await until(() => existsSync(kept.started), { timeoutMs: 20_000, what: 'ns-1 started' });
    const started = path.join(fleet.scratch, 'ns-2-started');
    await submit(operator, { runId: 'ns-2', argv: startedJob(started, path.join(fleet.scratch, 'ns-2-term')) });
    await until(() => existsSync(frozen), { timeoutMs: 20_000, what: 'the worker stopped at its lease journal' });
    t.is((await runOf(operator, 'ns-2')).status, 'running', 'the control plane handed the run out');
    await killNine(first);
    await until(async () => (await runOf(operator, 'ns-2')).status === 'unreachable', {
      timeoutMs: 20_000,
      what: 'ns-2 unreachable',
    });

    await fleet.worker(url, pem, ['--journal', journal]);
    const run = await ended(operator, 'ns-2');
    t.like(run, { status: 'failed', exit: { cause: 'never_started' } }, 'proved, with no operator act');
    t.false(existsSync(started), 'the job never ran');
    const [lease] = (
      await database.owner.query<{ released: boolean; sessionEnded: boolean }>(
        `SELECT l.released_at_ms IS NOT NULL AS released, s.ended_at_ms IS NOT NULL AS "sessionEnded"
           FROM run_dispatch_leases AS l JOIN worker_sessions AS s ON s.id = l.session_id WHERE l.run_id = $1`,
        ['ns-2'],
      )
    ).rows;
    t.deepEqual(
      lease,
      { released: true, sessionEnded: true },
      "the dead process's session can be granted nothing more",
    );
    const audit = await database.owner.query('SELECT 1 FROM worker_audit WHERE worker_name = $1', ['worker-ns']);
    t.is(audit.rowCount, 0, 'no forget');
    await until(async () => (await runOf(operator, 'ns-1')).status === 'running', {
      timeoutMs: 20_000,
      what: 'ns-1 re-attached',
    });
    t.false(existsSync(kept.marker), 'the journaled job runs on');
  },
);

test.serial(
  'cluster gate 27, under a cancel: a run cancelled while the worker killed -9 before journaling it is away ends cancelled, cause never_started, when the restarted worker settles its earlier session; the job never ran',
  async (t) => {
    t.timeout(120_000);
    const { fleet, url, operator } = await setUp(t, 'nc');
    const pem = fleet.certs.client('worker-nc');
    const journal = path.join(fleet.scratch, 'worker-nc.db');
    const frozen = path.join(fleet.scratch, 'frozen');
    const first = await fleet.worker(url, pem, ['--journal', journal], {
      options: ['--require', FREEZE],
      env: { PIDFENCE_TEST_FREEZE_OPEN: '[.]leases/nc-1[.]json[.]tmp$', PIDFENCE_TEST_FREEZE_MARKER: frozen },
    });
    const started = path.join(fleet.scratch, 'nc-1-started');
    await submit(operator, { runId: 'nc-1', argv: startedJob(started, path.join(fleet.scratch, 'nc-1-term')) });
    await until(() => existsSync(frozen), { timeoutMs: 20_000, what: 'the worker stopped at its lease journal' });
    await killNine(first);
    await until(async () => (await runOf(operator, 'nc-1')).status === 'unreachable', {
      timeoutMs: 20_000,
      what: 'nc-1 unreachable',
    });
    t.like(await operator.send('POST', '/v1/runs/nc-1/cancel', {}), { status: 200, body: { result: 'requested' } });

    await fleet.worker(url, pem, ['--journal', journal]);
    t.like(await ended(operator, 'nc-1'), { status: 'cancelled', exit: { cause: 'never_started' } });
    t.false(existsSync(started), 'the job never ran');
  },
);

test.serial(
  "cluster: a second worker started on the journal of one that still lives settles nothing of it: the live worker's session stays open; once it is killed, the next start settles it",
  async (t) => {
    t.timeout(120_000);
    const { database, fleet, url } = await setUp(t, 'lv');
    const pem = fleet.certs.client('worker-lv');
    const journal = path.join(fleet.scratch, 'worker-lv.db');
    const sessionOpen = async (): Promise<boolean> => {
      const { rows } = await database.owner.query<{ open: boolean }>(
        'SELECT ended_at_ms IS NULL AS open FROM worker_sessions WHERE principal = $1 ORDER BY started_at_ms LIMIT 1',
        ['worker-lv'],
      );
      return rows[0]?.open === true;
    };
    const first = await fleet.worker(url, pem, ['--journal', journal]);
    const second = await fleet.worker(url, pem, ['--journal', journal]);
    const records = (): number => readdirSync(`${journal}.leases/sessions`).length;
    await delay(2_000);
    t.true(await sessionOpen(), "the live worker's session was not settled: its runner is not proved gone");
    t.is(records(), 2, 'both session records kept');
    await killNine(first);
    await killNine(second);
    await fleet.worker(url, pem, ['--journal', journal]);
    // Only a settle removes a record: the two dead sessions are settled, the new one is recorded.
    await until(() => records() === 1, { timeoutMs: 20_000, what: 'both dead sessions settled' });
    t.false(await sessionOpen());
  },
);

test.serial(
  'cluster: a worker that died inside admission, between committing the local run and its attempt, reports the run failed/never_started after its restart (the deadline stop cannot strand it)',
  async (t) => {
    t.timeout(120_000);
    const { world, fleet, url, operator } = await setUp(t, 'ad');
    const pem = fleet.certs.client('worker-ad');
    const journal = path.join(fleet.scratch, 'worker-ad.db');
    await submit(operator, { runId: 'ad-1', argv: ['sleep', '60'], timeoutMs: 1_500 });
    // What the dead worker left: the pull answered, the lease journaled, the local run committed, no attempt.
    const caller = { principal: 'worker-ad', sessionId: await world.leases.registerSession('worker-ad') };
    const pulled = await world.leases.pullPage(caller, 1);
    if (pulled.kind !== 'assigned') throw new Error(`pull: ${pulled.kind}`);
    const [assignment] = pulled.assignments;
    t.is(assignment?.runId, 'ad-1');
    const { runId, projectId, attemptId, fence } = assignment as (typeof pulled.assignments)[number];
    new LeaseJournal(journal).write({
      runId,
      projectId,
      attemptId,
      fence,
      localAttemptId: null,
      stopAfterDisconnectMs: null,
    });
    const local = openSqliteStore(journal);
    await local.runStore.createRun({ runId, projectId });
    local.close();

    await fleet.worker(url, pem, ['--journal', journal]);
    t.like(await ended(operator, runId), { status: 'failed', exit: { cause: 'never_started' } });
    const reopened = openSqliteStore(journal);
    t.teardown(() => reopened.close());
    t.is((await reopened.runStore.getRun(runId))?.status, 'failed', 'the local journal says so too');
  },
);

test.serial(
  'cluster gate 28: a worker killed -9 within a second of pulling a job with a short task timeout, then restarted on its journal: a job that started gets its deadline stop (timed_out, receipt), one that did not ends failed, never started (or lost when its launcher exited without an order), 20 kill points',
  async (t) => {
    t.timeout(600_000);
    const { fleet, url, operator } = await setUp(t, 'dk');
    const pem = fleet.certs.client('worker-dk');
    const journal = path.join(fleet.scratch, 'worker-dk.db');
    let worker = await fleet.worker(url, pem, ['--journal', journal]);
    const tally: Record<string, number> = {};
    for (let i = 0; i < 20; i += 1) {
      const runId = `dk-${i}`;
      const started = path.join(fleet.scratch, `${runId}-started`);
      const marker = path.join(fleet.scratch, `${runId}-term`);
      await submit(operator, { runId, argv: startedJob(started, marker), timeoutMs: 1_500 });
      await until(async () => (await runOf(operator, runId)).status !== 'queued', {
        timeoutMs: 20_000,
        intervalMs: 5,
        what: `${runId} pulled`,
      });
      await delay(i * 50);
      await killNine(worker);
      worker = await fleet.worker(url, pem, ['--journal', journal]);
      // A kill in the start window (docs/decisions/0310) leaves a launcher without its order: no
      // job, and the restarted worker proves it never started, like every other kill point.
      const run = await ended(operator, runId, 15_000).catch(async (error: unknown) => {
        const local = await fleet.cli(pem, ['show', runId, '--db', journal, '--json']);
        t.log(`started ${existsSync(started)} marker ${existsSync(marker)}; local ${local.stdout} ${local.stderr}`);
        throw error;
      });
      const outcome = `${run.status}/${run.exit?.cause ?? '-'}/${existsSync(started) ? 'started' : 'not-started'}`;
      tally[outcome] = (tally[outcome] ?? 0) + 1;
      if (existsSync(started)) {
        await until(() => existsSync(marker), {
          timeoutMs: 20_000,
          what: `${runId}: the deadline stop reached the job`,
        });
        t.is(readFileSync(marker, 'utf8').trim(), 'term', runId);
        t.like(run, { status: 'timed_out', exit: { cause: 'receipt' } }, runId);
      } else {
        // A kill after the handle's commit and before the order was written leaves a launcher that
        // exits without starting the job and without a receipt: `lost`, which is what is proved
        // (docs/decisions/0310). Never a success, and never a stop of a job that did not run.
        t.is(run.status, 'failed', `${runId}: it never started`);
        t.true(['never_started', 'lost'].includes(run.exit?.cause ?? ''), `${runId}: cause ${run.exit?.cause}`);
      }
    }
    t.log(JSON.stringify(tally));
  },
);

/** Frames of the product's own files (not a driver's, not the test's). */
const PRODUCT_FRAME = /^(?!.*node_modules)(?!.*[\\/]test[\\/]).*[\\/]lib[\\/]/;
const TICKS = 8;

interface TimerSample {
  readonly pages: number;
  readonly created: number;
  readonly live: number;
}

/** Product timers created across TICKS lease pages, and those alive after them. */
async function sampleTicks(census: TimerCensus, pages: () => number): Promise<TimerSample> {
  const [pagesBefore, createdBefore] = [pages(), census.createdFromOrigin];
  await until(() => pages() >= pagesBefore + TICKS, { timeoutMs: 30_000, what: `${TICKS} lease pages` });
  const sample = { pages: pages() - pagesBefore, created: census.createdFromOrigin - createdBefore };
  await delay(50);
  return { ...sample, live: census.liveFromOrigin };
}

test.serial(
  'cluster gate 29: a worker keeps a bounded number of timers: idle, and holding K leases across several ticks, the same live product timers and no timer per job or per tick step',
  async (t) => {
    t.timeout(120_000);
    const { fleet, url, operator } = await setUp(t, 'tc');
    const pem = fleet.certs.client('worker-tc');
    const census = timerCensus({ origin: PRODUCT_FRAME });
    t.teardown(() => census.disable());
    let pages = 0;
    const worker = await startWorker({
      controlPlaneUrls: [url],
      tls: { cert: pem.cert, key: pem.key, ca: fleet.certs.ca.cert },
      journalFile: path.join(fleet.scratch, 'worker-tc.db'),
      capacity: 8,
      tickMs: 200,
      graceMs: 1_000,
      observe: ({ what }) => {
        if (what.startsWith('page_')) pages += 1;
      },
    });
    t.teardown(() => worker.close());
    const idle = await sampleTicks(census, () => pages);
    const K = 6;
    for (let i = 0; i < K; i += 1) await submit(operator, { runId: `tc-${i}`, argv: ['sleep', '60'] });
    await until(() => worker.held() === K, { timeoutMs: 30_000, what: `${K} leases held` });
    await until(async () => (await runOf(operator, `tc-${K - 1}`)).status === 'running', { timeoutMs: 20_000 });
    await delay(500);
    const holding = await sampleTicks(census, () => pages);
    t.log(JSON.stringify({ idle, holding, K }));
    // The cycle's timer, the opt-in disconnect interval and the local lifecycle's one timer, plus a request's timeout in flight.
    t.true(idle.live <= 4, `${idle.live} live product timers idle`);
    t.true(holding.live <= idle.live, `${holding.live} live product timers with ${K} leases, ${idle.live} idle`);
    t.true(
      holding.created / holding.pages <= idle.created / idle.pages + 1,
      `timers per tick: ${holding.created}/${holding.pages} with ${K} leases, ${idle.created}/${idle.pages} idle`,
    );
    t.is(census.watchers, 0, 'no file-system watcher');
    await worker.close();
  },
);
