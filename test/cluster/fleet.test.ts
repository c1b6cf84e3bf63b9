// The operator's view of the fleet (issue 30 item 5; docs/decisions/0241, 0245): `pidfence workers`,
// cordon, drain and uncordon of a real worker process, the same facts on the status page and in the
// metrics; two operators acting on one worker at once; a run handed out while a drain commits. Real
// PostgreSQL, HTTPS with client certificates, `pidfence` processes.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { request } from 'node:https';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import { startControlPlane } from '../../lib/cluster/control-plane';
import { FleetControl } from '../../lib/cluster/fleet';
import { packageVersion } from '../../lib/base/package-version';
import type { WorkerFleet, WorkerView } from '../../lib/contract/index';
import { PostgresGrantAdministration, PostgresManagementStore } from '../../lib/store/postgres/index';
import { makeCertificates, type Pem } from '../helpers/certificates';
import { parseExposition } from '../helpers/exposition';
import { delay, until } from '../helpers/wait';
import { clusterFixture } from './world';
import { fleetWorld, markingJob } from './fleet-world';

const ready = clusterFixture('cluster_fleet');
const PROJECT = 'project-fl';

function get(url: string, pem: Pem, ca: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, url),
      { cert: pem.cert, key: pem.key, ca, minVersion: 'TLSv1.3', agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

test.serial(
  'cluster: a cordoned worker pulls nothing and keeps its job; drain asks its runs to stop and it becomes drained; uncordon gives it work again; `pidfence workers`, the status page and the metrics say so',
  async (t) => {
    t.timeout(150_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane(['--metrics']);
    const admin = fleet.certs.client('fleet-admin');
    await fleet.grant('fleet-admin', '@cluster', 'worker.manage');
    await fleet.grant('fleet-admin', '@cluster', 'worker.read');
    await fleet.grant('op-fl', PROJECT, 'run.stop');
    const operatorPem = fleet.certs.client('op-fl');
    const operator = new ControlPlaneClient(url, {
      cert: operatorPem.cert,
      key: operatorPem.key,
      ca: fleet.certs.ca.cert,
    });
    t.teardown(() => operator.close());
    await fleet.worker(url, fleet.certs.client('worker-fl'), ['--capacity', '3']);
    const workerOf = async (): Promise<WorkerView> => {
      const listed = await fleet.cli(admin, ['workers', '--control-plane', url, '--json']);
      if (listed.code !== 0) throw new Error(`pidfence workers: ${listed.stderr}`);
      const found = (JSON.parse(listed.stdout) as WorkerFleet).workers.find((worker) => worker.name === 'worker-fl');
      if (found === undefined) throw new Error('worker-fl is not listed');
      return found;
    };
    t.like(await workerOf(), {
      version: packageVersion(),
      state: 'active',
      sessions: 1,
      leasesHeld: 0,
      capacity: 3,
      revokedAtMs: null,
    });

    const marker = path.join(fleet.scratch, 'fl-a.term');
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'fl-a', projectId: PROJECT, argv: markingJob(marker) }), {
      status: 200,
    });
    await until(async () => (await world.runStore.getRun('fl-a'))?.status === 'running', {
      what: 'fl-a running',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.like(await workerOf(), { state: 'active', leasesHeld: 1 });

    const cordoned = await fleet.cli(admin, ['worker', 'cordon', 'worker-fl', '--control-plane', url]);
    t.is(cordoned.code, 0, cordoned.stderr);
    t.regex(cordoned.stdout, /worker worker-fl: cordoned \(cordon: done/);
    t.like(await operator.send('POST', '/v1/jobs', { runId: 'fl-b', projectId: PROJECT, argv: ['true'] }), {
      status: 200,
    });
    await delay(2_000); // ten ticks of the worker
    t.is((await world.runStore.getRun('fl-b'))?.status, 'queued', 'a cordoned worker pulls nothing');
    t.false(existsSync(marker), 'what it runs goes on');
    const listed = await fleet.cli(admin, ['workers', '--control-plane', url]);
    t.regex(
      listed.stdout,
      /worker-fl\s+\S+\s+cordoned\s+1\s+\d+ (ms|s)\s+1\s+0\s+3/,
      'the table: version, state, sessions, heartbeat, leases, unreachable, capacity',
    );
    t.true(
      (await workerOf()).lastHeartbeatAgeMs! < 5_000,
      'its held-back pulls and ticks still count as its heartbeat',
    );

    const page = await get(url, admin, fleet.certs.ca.cert, '/status/workers');
    t.is(page.status, 200);
    t.regex(page.text, /data-worker="worker-fl">.*data-state="cordoned"/s);
    t.regex(page.text, /data-fact="state-cordoned">1</);
    t.notRegex(page.text, /wks-|fl-a|sleep|<script/i, 'no session, run or command on the page');
    const stranger = fleet.certs.client('stranger-fl');
    const refused = await get(url, stranger, fleet.certs.ca.cert, '/status/workers');
    t.is(refused.status, 403);
    t.regex(refused.text, /ERR_PIDFENCE_NOT_PERMITTED/);
    t.notRegex(refused.text, /worker-fl/);
    const scrape = await get(url, fleet.certs.client('prometheus'), fleet.certs.ca.cert, '/metrics');
    const metrics = parseExposition(scrape.text);
    t.is(metrics.value('pidfence_workers', { state: 'cordoned' }), 1);
    t.is(metrics.value('pidfence_worker_leases_held'), 1);
    t.true(
      (metrics.value('pidfence_worker_refusals_total', { reason: 'cordoned' }) ?? 0) > 0,
      'held-back pulls are counted',
    );
    t.false(scrape.text.includes('worker-fl'), 'no worker name in the metrics');

    const drained = await fleet.cli(admin, ['worker', 'drain', 'worker-fl', '--control-plane', url]);
    t.is(drained.code, 0, drained.stderr);
    t.regex(drained.stdout, /worker worker-fl: draining \(drain: done, revision \d+\); 1 run\(s\) asked to stop now/);
    await until(async () => (await world.runStore.getRun('fl-a'))?.status === 'cancelled', {
      what: 'fl-a stopped by the drain',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.true(existsSync(marker), 'the job got TERM on its worker');
    t.is((await world.runStore.getRun('fl-a'))?.cancelReason, 'shutdown');
    await until(async () => (await workerOf()).state === 'drained', {
      what: 'worker-fl drained',
      timeoutMs: 10_000,
      intervalMs: 200,
    });
    t.is((await world.runStore.getRun('fl-b'))?.status, 'queued');

    t.regex(
      (await fleet.cli(admin, ['worker', 'uncordon', 'worker-fl', '--control-plane', url])).stdout,
      /worker worker-fl: active \(uncordon: done/,
    );
    await until(async () => (await world.runStore.getRun('fl-b'))?.status === 'succeeded', {
      what: 'fl-b run once the worker takes work again',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    const audit = await database.owner.query<{ action: string }>(
      "SELECT action FROM worker_audit WHERE worker_name = 'worker-fl' ORDER BY created_at_ms, id",
    );
    t.deepEqual(
      audit.rows.map((row) => row.action),
      ['cordon', 'drain', 'uncordon'],
    );
  },
);

test.serial(
  'cluster: two operators cordoning and draining one worker at once: it ends draining whatever the order, every act is audited, and the revision counts exactly the changes',
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const certs = makeCertificates();
    t.teardown(() => certs.remove());
    const plane = await startControlPlane({
      databaseUrl: database.runtimeUrl,
      tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert },
    });
    t.teardown(() => plane.close());
    const admin = new PostgresGrantAdministration(database.owner);
    for (const subject of ['op-one', 'op-two'])
      await admin.writeGrant({ subject, projectId: '@cluster', permission: 'worker.manage' }, 'test-owner');
    const client = (cn: string): ControlPlaneClient => {
      const pem = certs.client(cn);
      const made = new ControlPlaneClient(plane.url, { cert: pem.cert, key: pem.key, ca: certs.ca.cert });
      t.teardown(() => made.close());
      return made;
    };
    t.like(await client('worker-race2').send('POST', '/v1/sessions', {}), { status: 200 });
    const [one, two] = [client('op-one'), client('op-two')];
    const acts = Array.from({ length: 12 }, (_, i) =>
      i % 2 === 0
        ? one.send<{ outcome: string; revision: number }>('POST', '/v1/workers/worker-race2/cordon')
        : two.send<{ outcome: string; revision: number }>('POST', '/v1/workers/worker-race2/drain'),
    );
    const answers = await Promise.all(acts);
    t.true(
      answers.every((answer) => answer.status === 200),
      JSON.stringify(answers.map((answer) => answer.status)),
    );
    const [row] = (
      await database.owner.query<{ admission: string; revision: string }>(
        "SELECT admission, revision FROM cluster_workers WHERE name = 'worker-race2'",
      )
    ).rows;
    t.is(row?.admission, 'draining', 'a cordon never undoes a drain');
    const audit = (
      await database.owner.query<{ action: string; actor: string; outcome: string; revision: string }>(
        "SELECT action, actor, outcome, revision FROM worker_audit WHERE worker_name = 'worker-race2'",
      )
    ).rows;
    t.is(audit.length, 12, 'every act is audited, the idempotent ones too');
    const changes = audit.filter((entry) => entry.outcome === 'changed');
    t.is(Number(row?.revision), changes.length, 'no change was lost or counted twice');
    t.is(changes.filter((entry) => entry.action === 'drain').length, 1);
    t.true(changes.filter((entry) => entry.action === 'cordon').length <= 1);
    t.deepEqual(
      new Set(changes.map((entry) => Number(entry.revision))).size,
      changes.length,
      'each change has its own revision',
    );
    t.deepEqual([...new Set(audit.map((entry) => `${entry.action}:${entry.actor}`))].sort(), [
      'cordon:op-one',
      'drain:op-two',
    ]);
  },
);

test.serial(
  'cluster: a run handed out while a drain commits is asked to stop at once; to a worker that takes work, nothing is asked',
  async (t) => {
    const { database, world } = await ready;
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: 'fleet-admin2', projectId: '@cluster', permission: 'worker.manage' },
      'test-owner',
    );
    const fleet = new FleetControl(world.pool, new PostgresManagementStore(world.pool), world.runStore);
    const pulledBy = async (name: string): Promise<string> => {
      const sessionId = await world.leases.registerSession(name);
      const runId = `fl-race-${randomUUID()}`;
      await world.leases.enqueueJob({ runId, projectId: PROJECT, argv: ['sleep', '30'] });
      t.like(await fleet.admit(name), { admission: 'active' }, 'the request was admitted before the drain');
      if (name === 'worker-draining')
        t.like(
          await fleet.act('fleet-admin2', name, 'drain'),
          { outcome: 'changed', stopsRequested: 0 },
          'the drain saw no lease yet',
        );
      for (;;) {
        const pulled = await world.leases.pull({ principal: name, sessionId });
        if (pulled.kind !== 'assigned') throw new Error(`pull: ${pulled.kind}`);
        if (pulled.assignment.runId === runId) break;
      }
      await fleet.afterAssignment(name, runId);
      return runId;
    };
    const raced = await pulledBy('worker-draining');
    t.like(await world.runStore.getRun(raced), { status: 'running', cancelReason: 'shutdown' });
    t.deepEqual(await world.eventTypes(raced), ['run.cancel_requested']);
    const taken = await pulledBy('worker-taking');
    t.like(await world.runStore.getRun(taken), { status: 'running', cancelRequestedAtMs: null });
  },
);
