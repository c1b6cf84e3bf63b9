// The worker's completion reports in pages (docs/decisions/0432): WorkerCycle.reportCompletions
// against a scripted control plane, with a real lease journal. Pages of up to 64, oldest first, one
// request each; each answer acted on as the single report's; a 5xx or 403 keeps the whole page; an
// unattached run's end waits with those behind it; a run not held is dequeued without a request; a
// replica without the page (404) takes this cycle's reports one by one.
import fs from 'node:fs';

import test, { type ExecutionContext } from 'ava';

import { LeaseJournal } from '../../lib/cluster/lease-journal';
import { WorkerCycle, type CycleParts } from '../../lib/cluster/worker-cycle';
import { tempFile } from '../helpers/temp-file';

interface Sent {
  readonly path: string;
  readonly body: { readonly completions?: ReadonlyArray<{ runId: string }>; readonly runId?: string };
}

type Reply = { status: number; body: unknown };

/** Answers every report of a page `completed`, and a single report the same. */
const ANSWER_ALL = (sent: Sent): Reply =>
  sent.path === '/v1/completions/page'
    ? {
        status: 200,
        body: { answers: (sent.body.completions ?? []).map(({ runId }) => ({ runId, kind: 'completed' })) },
      }
    : { status: 200, body: { kind: 'completed' } };

const REPORT = { status: 'succeeded', cause: 'receipt', exit: { exitCode: 0, signal: null } } as const;

/** A cycle holding `runIds` (attached) with each one's end queued in that order; `reply` plays the control plane. */
function cycleOf(t: ExecutionContext, runIds: readonly string[], reply: (sent: Sent) => Reply = ANSWER_ALL) {
  const journal = tempFile('pidfence-worker-completions-');
  t.teardown(() => journal.cleanup());
  const leases = new LeaseJournal(journal.file);
  const sent: Sent[] = [];
  const observed: string[] = [];
  const completions: CycleParts['completions'] = [];
  const cycle = new WorkerCycle({
    options: {},
    observe: (what, code) => observed.push(code === undefined ? what : `${what} ${code}`),
    send: async <T>(path: string, body: unknown) => {
      const request = { path, body: body as Sent['body'] };
      sent.push(request);
      return reply(request) as { status: number; body: T };
    },
    state: { revoked: false },
    session: { id: 'wks-1' },
    completions,
    leases,
    local: undefined as never,
    app: undefined as never,
    tickMs: 200,
    reRegister: async () => 'wks-2',
    earlierSessions: [],
  });
  for (const [i, runId] of runIds.entries()) {
    const lease = { runId, projectId: 'project-w', attemptId: `att-${i}`, fence: 1 + i, localAttemptId: null };
    leases.write({ ...lease, stopAfterDisconnectMs: null });
    cycle.adopt({ ...lease, stopAfterDisconnectMs: null });
    (cycle.held.get(runId) as { attached: boolean }).attached = true;
    completions.push({ runId, report: { ...REPORT } });
  }
  return { cycle, sent, observed, completions, leases };
}

const runsOf = (sent: Sent): string[] => (sent.body.completions ?? []).map(({ runId }) => runId);
const ids = (count: number): string[] => Array.from({ length: count }, (_, i) => `run-${String(i).padStart(3, '0')}`);

test('cluster: a worker reports 130 queued ends in 3 requests of 64, 64 and 2, oldest first; each answer observed and its run dropped', async (t) => {
  const runIds = ids(130);
  const { cycle, sent, observed, completions, leases } = cycleOf(t, runIds);
  await cycle.reportCompletions();
  t.deepEqual(
    sent.map((request) => request.path),
    ['/v1/completions/page', '/v1/completions/page', '/v1/completions/page'],
  );
  t.deepEqual(sent.flatMap(runsOf), runIds, 'oldest first, each once');
  t.deepEqual(
    sent.map((request) => runsOf(request).length),
    [64, 64, 2],
  );
  t.like(sent[0]?.body, { sessionId: 'wks-1' });
  t.deepEqual((sent[0]?.body.completions ?? [])[1], { runId: 'run-001', attemptId: 'att-1', fence: 2, ...REPORT });
  t.is(observed.filter((what) => what === 'completion_completed').length, 130);
  t.is(completions.length, 0);
  t.is(cycle.held.size, 0);
  t.deepEqual(leases.read(), [], 'no lease file left');
});

test('cluster: a 5xx or a 403 on a completion page keeps the whole page and everything behind it queued', async (t) => {
  for (const status of [500, 503, 403]) {
    const runIds = ids(70);
    const { cycle, sent, completions } = cycleOf(t, runIds, () => ({ status, body: { code: 'ERR_X' } }));
    await cycle.reportCompletions();
    t.is(sent.length, 1, `${status}: one request, then the cycle goes on`);
    t.deepEqual(
      completions.map((queued) => queued.runId),
      runIds,
      `${status}: every end still queued`,
    );
    t.is(cycle.held.size, 70);
  }
});

test("cluster: a refused report and a lost one are acted on as the single route's; an answer that leaves a report out keeps it queued", async (t) => {
  const { cycle, observed, completions } = cycleOf(t, ['run-a', 'run-b', 'run-c', 'run-d'], () => ({
    status: 200,
    body: {
      answers: [
        { runId: 'run-a', kind: 'refused', code: 'ERR_PIDFENCE_WORKER_FORGOTTEN' },
        { runId: 'run-b', kind: 'lost' },
        { runId: 'run-c', kind: 'already_terminal' },
      ],
    },
  }));
  await cycle.reportCompletions();
  t.deepEqual(observed, [
    'completion_refused ERR_PIDFENCE_WORKER_FORGOTTEN',
    'completion_lost',
    'completion_already_terminal',
  ]);
  t.deepEqual(
    completions.map((queued) => queued.runId),
    ['run-d'],
  );
  t.deepEqual([...cycle.held.keys()], ['run-d']);
});

test("cluster: an unattached run's end waits with every end behind it; a run not held is dequeued without a request", async (t) => {
  const { cycle, sent, completions } = cycleOf(t, ['run-a', 'run-b', 'run-c', 'run-d']);
  cycle.held.delete('run-b');
  (cycle.held.get('run-c') as { attached: boolean }).attached = false;
  await cycle.reportCompletions();
  t.deepEqual(sent.map(runsOf), [['run-a']]);
  t.deepEqual(
    completions.map((queued) => queued.runId),
    ['run-c', 'run-d'],
  );
  (cycle.held.get('run-c') as { attached: boolean }).attached = true;
  await cycle.reportCompletions();
  t.deepEqual(sent.map(runsOf), [['run-a'], ['run-c', 'run-d']]);
});

test("cluster: a replica without the completion page (404) gets this cycle's reports one per request, and the next cycle tries the page again", async (t) => {
  let hasPage = false;
  const { cycle, sent, observed, completions } = cycleOf(t, ['run-a', 'run-b', 'run-c'], (request) =>
    request.path === '/v1/completions/page' && !hasPage
      ? { status: 404, body: { message: 'Route POST:/v1/completions/page not found', statusCode: 404 } }
      : ANSWER_ALL(request),
  );
  await cycle.reportCompletions();
  t.deepEqual(
    sent.map((request) => request.path),
    ['/v1/completions/page', '/v1/completions', '/v1/completions', '/v1/completions'],
  );
  t.deepEqual(
    sent.slice(1).map((request) => request.body.runId),
    ['run-a', 'run-b', 'run-c'],
  );
  t.is(observed[0], 'completion_page_fallback http_404');
  t.is(completions.length, 0);
  hasPage = true;
  cycle.adopt({
    runId: 'run-e',
    projectId: 'project-w',
    attemptId: 'att-e',
    fence: 9,
    localAttemptId: null,
    stopAfterDisconnectMs: null,
  });
  (cycle.held.get('run-e') as { attached: boolean }).attached = true;
  completions.push({ runId: 'run-e', report: { ...REPORT } });
  await cycle.reportCompletions();
  t.is(sent.at(-1)?.path, '/v1/completions/page', 'the next cycle sends a page again');
});

test.serial(
  "cluster: the lease records of a page's 64 taken ends are removed with one directory sync, not one each",
  async (t) => {
    const { cycle, leases } = cycleOf(t, ids(64));
    t.is(leases.read().length, 64);
    // Counted, not replaced: each call still syncs (the module's own binding is read at every call).
    // Serial: AVA runs it before the file's other tests, whose journals sync too.
    const real = fs.fsyncSync;
    let syncs = 0;
    fs.fsyncSync = (fd: number) => {
      syncs += 1;
      real(fd);
    };
    try {
      await cycle.reportCompletions();
    } finally {
      fs.fsyncSync = real;
    }
    t.is(leases.read().length, 0, 'every record removed');
    t.is(syncs, 1, 'one directory sync for the page');
  },
);

test('cluster: a lease the page says this worker holds but it never received is reported never_started with its fence; one it holds is left alone', async (t) => {
  const { cycle, sent, completions, observed } = cycleOf(t, ['run-a'], (request) =>
    request.path === '/v1/workers/leases'
      ? {
          status: 200,
          body: {
            session: 'live',
            answers: [
              { runId: 'run-a', kind: 'unnamed', attemptId: 'att-0', fence: 1, projectId: 'project-w' },
              { runId: 'run-x', kind: 'unnamed', attemptId: 'att-x', fence: 7, projectId: 'project-w' },
            ],
          },
        }
      : ANSWER_ALL(request),
  );
  completions.length = 0;
  await cycle.run(true);
  t.deepEqual(
    completions.map(({ runId, report }) => ({ runId, cause: report.cause, status: report.status })),
    [{ runId: 'run-x', cause: 'never_started', status: 'failed' }],
    'only the lease it never received is ended, as never started',
  );
  t.true(observed.includes('lease_never_received'));
  await cycle.reportCompletions();
  const page = sent.at(-1);
  t.is(page?.path, '/v1/completions/page');
  t.like(page?.body.completions?.[0], { runId: 'run-x', attemptId: 'att-x', fence: 7, cause: 'never_started' });
  t.false(cycle.held.has('run-x'), 'dropped once its end was taken');
  t.true(cycle.held.has('run-a'), 'the run it holds is untouched');
});
