// Containment on every surface (issue 27 item 5, docs/decisions/0180, 0302): after real runs, one
// born in its own cgroup and one in group containment, `list --json` carries each run's
// `containment`, the status page's run list and run card show it, and a job started with
// leftovers `keep` is said to be so by `show` and the run card (and only that one).
import path from 'node:path';

import type { ExecutionContext } from 'ava';

import { createExecution } from '../../lib/execution/index';
import { forgetCgroupSubtree } from '../../lib/process/job-cgroup';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { startLocalServer } from '../../lib/web/local-server';
import { testSubtree } from '../helpers/cgroup';
import { cgroupTestOrSkip } from '../helpers/cgroup-test';
import { until } from '../helpers/wait';
import { grantCancelOnSqlite } from '../execution/cli-runs';
import { pidfence, tempDir } from './pidfence-process';

const cgroupTest = cgroupTestOrSkip('containment surface');

async function runOnce(t: ExecutionContext, db: string, cgroup: string): Promise<string> {
  const run = await pidfence(['run', '--json', '--db', db, '--cgroup', cgroup, '--', 'true'], {}, path.dirname(db));
  t.is(run.code, 0, run.stderr);
  return (JSON.parse(run.stdout) as { runId: string }).runId;
}

/** A run of `true` with leftovers `keep`, admitted through the library (the CLI has no such option). */
async function keptRun(db: string): Promise<string> {
  process.env.PIDFENCE_CGROUP = 'off';
  forgetCgroupSubtree();
  const store = openSqliteStore(db);
  const app = createExecution({
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
    receiptDirectory: `${db}.receipts`,
  });
  try {
    const admitted = await app.admit({ projectId: 'default', command: 'true', args: [], leftovers: 'keep' });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    app.start();
    await until(async () => (await store.runStore.getRun(admitted.runId))?.status === 'succeeded', {
      what: 'the kept run ended',
    });
    return admitted.runId;
  } finally {
    await app.drain();
    delete process.env.PIDFENCE_CGROUP;
    forgetCgroupSubtree();
  }
}

cgroupTest(
  'list --json, the status page run list and the run card show each run containment; show and the run card say when keep was chosen',
  async (t) => {
    const db = path.join(tempDir(t), 'store.db');
    const contained = await runOnce(t, db, testSubtree(t, 'surfaces'));
    const grouped = await runOnce(t, db, 'off');
    const kept = await keptRun(db);

    const list = await pidfence(['list', '--json', '--db', db], {}, path.dirname(db));
    const items = (JSON.parse(list.stdout) as { items: Array<{ runId: string; containment: string | null }> }).items;
    t.deepEqual(
      items.map((item) => [item.runId, item.containment]),
      [
        [kept, 'group'],
        [grouped, 'group'],
        [contained, 'cgroup'],
      ],
    );

    const shownKept = await pidfence(['show', '--db', db, kept], {}, path.dirname(db));
    t.regex(shownKept.stdout, /\n {2}leftovers +keep: what the job left behind was left running at its end/);
    const shownPlain = await pidfence(['show', '--db', db, contained], {}, path.dirname(db));
    t.notRegex(shownPlain.stdout, /leftovers/, 'the default (stop) needs no line');

    await grantCancelOnSqlite(db); // the page's reader (this process's user on loopback) needs run.read
    const store = openSqliteStore(db);
    t.teardown(() => store.close());
    const server = await startLocalServer({
      host: '127.0.0.1',
      port: 0,
      management: store.managementStore,
      metrics: { contentType: 'text/plain', exposition: async () => '' },
    });
    t.teardown(() => server.close());
    const runsPage = await (await fetch(`${server.url}/status/projects/default/runs`)).text();
    t.deepEqual(
      [...runsPage.matchAll(/<td data-containment>([a-z]+)<\/td>/g)].map((match) => match[1]),
      ['group', 'group', 'cgroup'],
    );
    const card = async (runId: string, fact: string): Promise<string | undefined> =>
      new RegExp(`data-fact="${fact}">([^<]*)<`).exec(
        await (await fetch(`${server.url}/status/runs/${runId}`)).text(),
      )?.[1];
    t.is(await card(contained, 'containment'), 'cgroup');
    t.is(await card(contained, 'leftovers'), 'stop');
    t.is(await card(kept, 'leftovers'), 'keep (left running when the job ended)');
  },
);
