// Cluster runs from the CLI (issue 30 item 5; docs/decisions/0243): `pidfence run`, `list`, `show`
// and `cancel` with --control-plane and the operator's certificate, through a real control plane
// and a real worker, with the answers, refusals and exit statuses of the local verbs; and the worker
// permissions of `pidfence grant` (docs/decisions/0244). Real PostgreSQL, HTTPS, processes.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test from 'ava';

import { ControlPlaneClient } from '../../lib/cluster/client';
import type { RunDetail, RunListPage } from '../../lib/management/index';
import { PostgresGrantAdministration } from '../../lib/store/postgres/index';
import { until } from '../helpers/wait';
import { clusterFixture } from './world';
import { fleetWorld, markingJob } from './fleet-world';

const ready = clusterFixture('cluster_operator');
const PROJECT = 'project-op';

test.serial(
  "cluster: a run is submitted, listed, shown and cancelled with the local verbs and --control-plane; a waited run exits with its job's status",
  async (t) => {
    t.timeout(150_000);
    const { database, world } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    await fleet.worker(url, fleet.certs.client('worker-op'), ['--capacity', '4']);
    const operator = fleet.certs.client('op-c');
    for (const permission of ['run.read', 'run.stop'] as const) await fleet.grant('op-c', PROJECT, permission);
    const cp = ['--control-plane', url];
    const marker = path.join(fleet.scratch, 'op-detached.term');

    const submitted = await fleet.cli(operator, [
      'run',
      ...cp,
      '--project',
      PROJECT,
      '--name',
      'op-nightly',
      '--detach',
      '--',
      ...markingJob(marker),
    ]);
    t.is(submitted.code, 0, submitted.stderr);
    const runId = submitted.stdout.trim();
    t.regex(runId, /^run-[0-9a-f-]{36}$/);
    t.regex(
      submitted.stderr,
      new RegExp(`run ${runId} queued on ${url} \\(stop it with: pidfence cancel ${runId} --control-plane ${url}\\)`),
    );
    await until(async () => (await world.runStore.getRun(runId))?.status === 'running', {
      what: 'the detached run running',
      timeoutMs: 20_000,
      intervalMs: 100,
    });

    // The endpoint the CLI reads: GET /v1/runs/<id> answers the run, as `pidfence show` does locally.
    const http = new ControlPlaneClient(url, { cert: operator.cert, key: operator.key, ca: fleet.certs.ca.cert });
    t.teardown(() => http.close());
    t.like(await http.send<RunDetail>('GET', `/v1/runs/${runId}`), {
      status: 200,
      body: { runId, projectId: PROJECT, status: 'running' },
    });

    const listed = await fleet.cli(operator, ['list', ...cp, '--project', PROJECT, '--json']);
    t.is(listed.code, 0, listed.stderr);
    t.like(
      (JSON.parse(listed.stdout) as RunListPage).items.find((item) => item.runId === runId),
      { name: 'op-nightly', status: 'running', cancelReason: null },
    );
    const runningOnly = await fleet.cli(operator, ['ps', ...cp, '--project', PROJECT, '--state', 'running']);
    t.regex(
      runningOnly.stdout,
      new RegExp(`project ${PROJECT}: 1 running run\\(s\\) on this page[\\s\\S]*${runId}\\s+op-nightly\\s+running`),
    );
    const shown = await fleet.cli(operator, ['show', runId, ...cp]);
    t.is(shown.code, 0, shown.stderr);
    t.regex(shown.stdout, new RegExp(`^run ${runId} \\(project ${PROJECT}\\): running`));
    t.notRegex(shown.stdout, /sh -c|trap|wks-/, 'no command or session in the answer');

    const cancelled = await fleet.cli(operator, ['cancel', runId, ...cp]);
    t.is(cancelled.code, 0, cancelled.stderr);
    t.is(cancelled.stdout, `cancel requested for ${runId}; the worker that runs it stops the job at its next tick\n`);
    await until(async () => (await world.runStore.getRun(runId))?.status === 'cancelled', {
      what: 'the cancelled run ended',
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    t.true(existsSync(marker), 'the job got TERM on its worker');
    const after = JSON.parse((await fleet.cli(operator, ['show', runId, ...cp, '--json'])).stdout) as RunDetail;
    t.like(after, {
      status: 'cancelled',
      cancelReason: 'user',
      dispatch: { status: 'dispatched', lastResult: 'termination_requested' },
    });
    const again = await fleet.cli(operator, ['cancel', runId, ...cp]);
    t.is(again.code, 4);
    t.regex(again.stderr, /has already finished; nothing to cancel.*ERR_PIDFENCE_RUN_FINISHED/);

    const failing = await fleet.cli(operator, ['run', ...cp, '--project', PROJECT, '--', 'sh', '-c', 'exit 3']);
    t.is(failing.code, 3, failing.stderr);
    t.regex(failing.stderr, /pidfence: run run-\S+ failed\n$/);
    const json = await fleet.cli(operator, ['run', ...cp, '--project', PROJECT, '--json', '--', 'true']);
    t.is(json.code, 0, json.stderr);
    t.like(JSON.parse(json.stdout), {
      projectId: PROJECT,
      status: 'succeeded',
      exitStatus: 0,
      exit: { cause: 'receipt', exitCode: 0 },
    });
  },
);

test.serial(
  'cluster: the run verbs refuse on a cluster what they refuse locally, with the same codes and exit statuses',
  async (t) => {
    t.timeout(90_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const { url } = await fleet.plane();
    const cp = ['--control-plane', url];
    const viewer = fleet.certs.client('viewer-op');
    await fleet.grant('viewer-op', PROJECT, 'run.read');
    const stranger = fleet.certs.client('stranger-op');
    const [anyRun] = (
      await database.owner.query<{ id: string }>('SELECT id FROM runs WHERE project_id = $1 LIMIT 1', [PROJECT])
    ).rows;
    if (anyRun === undefined) throw new Error('the first test left no run');

    const expect = async (
      pem: typeof viewer,
      args: string[],
      code: number,
      pattern: RegExp,
      env: NodeJS.ProcessEnv = {},
    ): Promise<void> => {
      const answer = await fleet.cli(pem, args, env);
      t.is(answer.code, code, `${args.join(' ')}: ${answer.stderr}`);
      t.regex(answer.stderr, pattern, args.join(' '));
    };
    await expect(
      stranger,
      ['list', ...cp, '--project', PROJECT],
      4,
      /stranger-op does not hold run\.read on project project-op.*ERR_PIDFENCE_NOT_PERMITTED/,
    );
    await expect(stranger, ['show', anyRun.id, ...cp], 4, /ERR_PIDFENCE_RUN_NOT_FOUND/);
    await expect(
      viewer,
      ['cancel', anyRun.id, ...cp],
      4,
      /viewer-op does not hold run\.stop.*ERR_PIDFENCE_NOT_PERMITTED/,
    );
    await expect(viewer, ['run', ...cp, '--project', PROJECT, '--', 'true'], 4, /ERR_PIDFENCE_NOT_PERMITTED/);
    await expect(
      viewer,
      ['list', ...cp, '--db', 'x.db', '--project', PROJECT],
      2,
      /--db and --control-plane do not go together/,
    );
    await expect(
      viewer,
      ['list', ...cp, '--as', 'someone', '--project', PROJECT],
      2,
      /--as does not go with --control-plane/,
    );
    await expect(viewer, ['run', '--detach', '--', 'true'], 2, /--detach needs --control-plane/);
    await expect(viewer, ['run', ...cp, '--grace', '1s', '--', 'true'], 2, /--grace is the worker's on a cluster/);
    await expect(viewer, ['list', ...cp, '--project', PROJECT], 2, /--cert <file> is required with --control-plane/, {
      PIDFENCE_CERT: '',
    });
    await expect(
      viewer,
      ['list', '--control-plane', 'http://127.0.0.1:1', '--project', PROJECT],
      2,
      /must be an https:\/\/ URL/,
    );
    await expect(
      viewer,
      ['list', '--control-plane', 'https://127.0.0.1:1', '--project', PROJECT],
      3,
      /could not be reached \(refused\).*ERR_PIDFENCE_CLUSTER_UNREACHABLE/,
    );
    const jsonError = await fleet.cli(stranger, ['list', ...cp, '--project', PROJECT, '--json']);
    t.like(JSON.parse(jsonError.stderr), { error: { code: 'ERR_PIDFENCE_NOT_PERMITTED', category: 'refused' } });
  },
);

test.serial(
  'pidfence grant gives the worker permissions on @cluster only, and only on a PostgreSQL store',
  async (t) => {
    t.timeout(60_000);
    const { database } = await ready;
    const fleet = fleetWorld(t, database);
    const pem = fleet.certs.client('unused');
    const owner = (await database.owner.query<{ role: string }>('SELECT session_user AS role')).rows[0]?.role ?? '';
    await new PostgresGrantAdministration(database.owner).writeGrant(
      { subject: owner, projectId: '@cluster', permission: 'grants.write' },
      'test-owner',
    );
    const granted = await fleet.cli(pem, [
      'grant',
      'ops-alice',
      '@cluster',
      'worker.manage',
      '--db',
      database.ownerUrl,
    ]);
    t.is(granted.code, 0, granted.stderr);
    t.is(granted.stdout, 'ops-alice worker.manage on @cluster: granted\n');
    const rows = await database.owner.query(
      "SELECT permission FROM management_grants WHERE subject = 'ops-alice' AND project_id = '@cluster'",
    );
    t.deepEqual(rows.rows, [{ permission: 'worker.manage' }]);
    const refusals: Array<[string[], RegExp]> = [
      [
        ['grant', 'ops-bob', '@cluster', 'run.read', '--db', database.ownerUrl],
        /run\.read is a project's permission; give it on a project, not on @cluster/,
      ],
      [
        ['grant', 'ops-bob', PROJECT, 'worker.read', '--db', database.ownerUrl],
        /worker\.read holds for the whole fleet: give it on @cluster/,
      ],
    ];
    const scratch = mkdtempSync(path.join(tmpdir(), 'pidfence-grant-'));
    t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
    refusals.push([
      ['grant', 'ops-bob', '@cluster', 'worker.read', '--db', path.join(scratch, 'local.db')],
      /@cluster is the scope of a cluster's workers, which only a PostgreSQL store has/,
    ]);
    for (const [args, pattern] of refusals) {
      const answer = await fleet.cli(pem, args);
      t.is(answer.code, 2, answer.stderr);
      t.regex(answer.stderr, pattern);
    }
    t.is(
      (await database.owner.query("SELECT count(*)::int AS n FROM management_grants WHERE subject = 'ops-bob'")).rows[0]
        ?.n,
      0,
    );
    // The database holds the same rule (migration 0013): a worker permission on a project is refused by its CHECK.
    await t.throwsAsync(
      database.owner.query("INSERT INTO management_grants VALUES ('x', 'project-x', 'worker.read', 'test', 0)"),
      { message: /management_grants_scope_check/ },
    );
  },
);
