// `pidfence status | blocked | inspect | rearm | grant` as a real child process (design/dispatch §6 gates 17
// and 18, design/dispatch §5.3-5.4): exit codes, text and JSON from the same facts, usage errors, an
// unreachable store, and the principal that must hold grants like any other.
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { createLeaseToken, type DispatchResult } from '../../lib/contract/index';
import { openSqliteStore, type SqliteStore } from '../../lib/store/sqlite/index';
import { migratedDatabase } from '../helpers/pg-store';
import { disownStore, pidfence, tempDir } from '../cli/pidfence-process';
import { driverOf } from '../../lib/store/sqlite/driver';

let sequence = 0;
async function settle(
  store: SqliteStore,
  projectId: string,
  result: DispatchResult | 'leased',
  retryDelayMs?: number,
): Promise<string> {
  sequence += 1;
  const runId = `run-${String(sequence).padStart(3, '0')}`;
  const attemptId = `${runId}-a1`;
  await store.runStore.createRun({ runId, projectId });
  await store.runStore.createAttempt({ runId, attemptId });
  const cancelled = await store.runStore.requestCancellation({ runId, reason: 'user', eventId: `${runId}-e1` });
  const cancelRequestedAtMs = cancelled.kind === 'requested' ? (cancelled.run.cancelRequestedAtMs ?? -1) : -1;
  const token = createLeaseToken();
  const claim = await store.dispatchRepository.claim({
    runId,
    attemptId,
    cancelRequestedAtMs,
    owner: 'cli-test-worker',
    token,
    leaseDurationMs: 600_000,
  });
  if (claim.kind !== 'claimed') throw new Error(`fixture: ${claim.kind}`);
  if (result === 'leased') return runId;
  const base = {
    runId,
    attemptId,
    owner: 'cli-test-worker',
    token,
    expectedVersion: claim.record.version,
    result,
    eventId: `${runId}-e2`,
  };
  await store.dispatchRepository.recordResult(retryDelayMs === undefined ? base : { ...base, retryDelayMs });
  return runId;
}

/** A database with the bootstrap admin `root` and viewer/operator grants, written through the CLI. */
async function grantedDatabase(t: ExecutionContext, dir: string): Promise<string> {
  const db = path.join(dir, 'pidfence.db');
  t.is((await pidfence(['grant', '--bootstrap', '--db', db, '--as', 'root', 'root', 'proj', 'grants.write'])).code, 0);
  for (const [subject, permission] of [
    ['viewer', 'run.read'],
    ['operator', 'run.read'],
    ['operator', 'run.stop'],
  ] as const) {
    const granted = await pidfence(['grant', '--db', db, '--as', 'root', subject, 'proj', permission]);
    t.is(granted.code, 0, granted.stderr);
    t.is(granted.stdout, `${subject} ${permission} on proj: granted\n`);
  }
  return db;
}

/** Parses `  label   value` lines back into facts (the first token of the value). */
function textFacts(text: string): Map<string, string> {
  const facts = new Map<string, string>();
  for (const line of text.split('\n').slice(1)) {
    const match = /^ {2}(.+?) {2,}(\S+)/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) facts.set(match[1], match[2]);
  }
  return facts;
}

test('gate 17: pidfence status exits 0 / 10 / 20 for clear / converging / attention_required, and text and --json carry the same facts', async (t) => {
  const dir = tempDir(t);
  const db = await grantedDatabase(t, dir);
  const env = { PIDFENCE_DB: db, PIDFENCE_PRINCIPAL: 'viewer' };
  const clear = await pidfence(['status', '--project', 'proj'], env);
  t.is(clear.code, 0, clear.stderr);
  t.regex(clear.stdout, /^project proj: clear\n/);

  const store = openSqliteStore(db);
  await settle(store, 'proj', 'termination_requested');
  await settle(store, 'proj', 'leased');
  store.close();
  const converging = await pidfence(['status', '--project', 'proj'], env);
  t.is(converging.code, 10);
  t.regex(converging.stdout, /^project proj: converging\n/);

  const again = openSqliteStore(db);
  await settle(again, 'proj', 'identity_mismatch');
  await settle(again, 'proj', 'pid_mismatch');
  again.close();
  const text = await pidfence(['status', '--project', 'proj'], env);
  const json = await pidfence(['status', '--project', 'proj', '--json'], env);
  t.is(text.code, 20);
  t.is(json.code, 20);
  const summary = JSON.parse(json.stdout) as {
    assessment: string;
    asOfMs: number;
    total: number;
    states: Record<string, number>;
    blockingResults: Record<string, number>;
    overdue: number;
    overdueAfterMs: number;
    running: number;
  };
  t.like(summary, {
    assessment: 'attention_required',
    total: 4,
    states: { leased: 1, dispatched: 1, blocked: 2 },
    blockingResults: { identity_mismatch: 1, pid_mismatch: 1 },
  });
  const facts = textFacts(text.stdout);
  t.is(facts.get('assessment'), summary.assessment);
  t.is(facts.get('dispatches'), String(summary.total));
  for (const [state, count] of Object.entries(summary.states)) t.is(facts.get(state), String(count), state);
  for (const [result, count] of Object.entries(summary.blockingResults))
    t.is(facts.get(`blocked by ${result}`), String(count), result);
  t.is(facts.get(`overdue (> ${summary.overdueAfterMs} ms)`), String(summary.overdue));
  t.is(facts.get('running jobs'), String(summary.running));
  t.false(/run-\d|cli-test-worker/.test(text.stdout + json.stdout), 'no run or lease identity');
});

test('gate 18: pidfence blocked shows 16 runs a page with a cursor to the next, text and JSON alike; inspect and rearm work through the same principal rules', async (t) => {
  const dir = tempDir(t);
  const db = await grantedDatabase(t, dir);
  const env = { PIDFENCE_DB: db, PIDFENCE_PRINCIPAL: 'operator' };
  const store = openSqliteStore(db);
  const blocked: string[] = [];
  for (let i = 0; i < 18; i += 1) blocked.push(await settle(store, 'proj', 'unsupported'));
  store.close();

  const first = await pidfence(['blocked', '--project', 'proj', '--json'], env);
  t.is(first.code, 0, first.stderr);
  const page = JSON.parse(first.stdout) as {
    items: Array<{ runId: string; blockedAtMs: number }>;
    next: string | null;
    asOfMs: number;
  };
  t.is(page.items.length, 16);
  t.truthy(page.next);
  const firstText = await pidfence(['blocked', '--project', 'proj'], env);
  t.deepEqual(
    firstText.stdout
      .split('\n')
      .filter((line) => /^ {2}run-/.test(line))
      .map((line) => line.trim().split(/\s+/)[0]),
    page.items.map((item) => item.runId),
  );
  t.regex(firstText.stdout, /\nnext page: pidfence blocked --project proj --cursor bp1\.[A-Za-z0-9_-]+\n$/);
  const second = await pidfence(['blocked', '--project', 'proj', '--json', '--cursor', page.next ?? ''], env);
  const rest = JSON.parse(second.stdout) as typeof page;
  t.deepEqual([...page.items, ...rest.items].map((item) => item.runId).sort(), blocked.sort());
  t.is(rest.next, null);

  const runId = blocked[0] ?? '';
  const inspected = JSON.parse((await pidfence(['inspect', runId, '--json'], env)).stdout) as {
    status: string;
    version: number;
    lastResult: string;
  };
  t.like(inspected, { status: 'blocked', lastResult: 'unsupported' });
  const viewerRearm = await pidfence(
    ['rearm', runId, '--expect-version', String(inspected.version), '--expect-result', 'unsupported'],
    { ...env, PIDFENCE_PRINCIPAL: 'viewer' },
  );
  t.is(viewerRearm.code, 4);
  t.regex(viewerRearm.stderr, /viewer does not hold run\.stop on project proj.*ERR_PIDFENCE_NOT_PERMITTED/);
  const stale = await pidfence(
    ['rearm', runId, '--expect-version', String(inspected.version - 1), '--expect-result', 'unsupported'],
    env,
  );
  t.is(stale.code, 4);
  t.regex(stale.stderr, /ERR_PIDFENCE_REARM_STALE/);
  const rearmed = await pidfence(
    ['rearm', runId, '--expect-version', String(inspected.version), '--expect-result', 'unsupported'],
    env,
  );
  t.is(rearmed.code, 0, rearmed.stderr);
  t.regex(rearmed.stdout, new RegExp(`^run ${runId} rearmed`));
  t.is(textFacts(rearmed.stdout).get('status'), 'retry_wait');
  t.false(/cli-test-worker/.test(rearmed.stdout));
});

test('gate 17: usage errors exit 2 with one reason line and the usage; --help works on every subcommand', async (t) => {
  const dir = tempDir(t);
  const db = await grantedDatabase(t, dir);
  const noProject = await pidfence(['status', '--db', db]);
  t.is(noProject.code, 2);
  t.regex(
    noProject.stderr,
    /^pidfence: --project <id> is required\. \(ERR_PIDFENCE_USAGE\)\nUsage: pidfence status \[options\]/,
  );
  const badVersion = await pidfence([
    'rearm',
    'run-1',
    '--db',
    db,
    '--expect-version',
    'seven',
    '--expect-result',
    'invalid',
  ]);
  t.is(badVersion.code, 2);
  t.regex(
    badVersion.stderr,
    /^pidfence: option '--expect-version <n>' argument 'seven' is invalid.* \(ERR_PIDFENCE_USAGE\)\n/,
  );
  t.regex(badVersion.stderr, /Usage: pidfence rearm \[options\] <runId>/);
  const badResult = await pidfence([
    'rearm',
    'run-1',
    '--db',
    db,
    '--as',
    'operator',
    '--expect-version',
    '2',
    '--expect-result',
    'dispatch_error',
  ]);
  t.is(badResult.code, 2);
  t.regex(badResult.stderr, /expectedResult must be one of identity_mismatch, pid_mismatch, unsupported, invalid/);
  t.false(/\n\s+at /.test(noProject.stderr + badVersion.stderr + badResult.stderr), 'no stack trace');
  for (const command of ['status', 'blocked', 'inspect', 'rearm', 'grant']) {
    const help = await pidfence([command, '--help']);
    t.is(help.code, 0, command);
    t.regex(help.stdout, new RegExp(`^Usage: pidfence ${command} `));
    t.regex(help.stdout, /--db <path\|url>/);
    t.regex(help.stdout, /--as <subject>/);
  }
});

test('gate 17: an unreachable store exits 3 with one sentence and no stack trace, for SQLite and PostgreSQL', async (t) => {
  const dir = tempDir(t);
  const missing = await pidfence(['status', '--project', 'proj'], {}, dir);
  t.is(missing.code, 3);
  t.is(
    missing.stderr,
    `pidfence: no pidfence database at ${path.join(dir, 'pidfence.db')}; pass --db <file|postgres-url> or set PIDFENCE_DB. (ERR_PIDFENCE_STORE_UNAVAILABLE)\n`,
  );
  const refusedPort = await pidfence(['status', '--project', 'proj', '--db', 'postgres://nobody@127.0.0.1:1/none']);
  t.is(refusedPort.code, 3);
  t.regex(
    refusedPort.stderr,
    /^pidfence: the postgres store lost or could not get its database connection.*\(ERR_PIDFENCE_STORE_UNAVAILABLE\)\n$/,
  );
  const unopenable = await pidfence([
    'grant',
    '--bootstrap',
    '--db',
    path.join(dir, 'no', 'such', 'dir', 'x.db'),
    'root',
    'proj',
    'grants.write',
  ]);
  t.is(unopenable.code, 3);
  t.regex(
    unopenable.stderr,
    /^pidfence: the directory .* does not exist; create it.*\(ERR_PIDFENCE_STORE_UNAVAILABLE\)\n$/,
  );
});

test('the CLI principal needs grants like anyone: default OS user, --bootstrap only once and only for grants.write', async (t) => {
  const dir = tempDir(t);
  const db = await grantedDatabase(t, dir);
  // The file's owner holds every grant (docs/decisions/0170): root must not be it here.
  disownStore(db);
  const anonymous = await pidfence(['status', '--db', db, '--project', 'proj'], { PIDFENCE_PRINCIPAL: '' });
  t.is(anonymous.code, 4);
  t.regex(anonymous.stderr, /does not hold run\.read on project proj/);
  const second = await pidfence(['grant', '--bootstrap', '--db', db, '--as', 'eve', 'eve', 'proj', 'grants.write']);
  t.is(second.code, 4);
  t.regex(second.stderr, /ERR_PIDFENCE_BOOTSTRAP_CLOSED/);
  const selfGrant = await pidfence(['grant', '--db', db, '--as', 'viewer', 'viewer', 'proj', 'run.stop']);
  t.is(selfGrant.code, 4);
  t.regex(selfGrant.stderr, /viewer does not hold grants\.write on project proj/);
  const revoked = await pidfence(['grant', '--revoke', '--db', db, '--as', 'root', 'viewer', 'proj', 'run.read']);
  t.is(revoked.stdout, 'viewer run.read on proj: revoked\n');
  t.is((await pidfence(['status', '--db', db, '--project', 'proj', '--as', 'viewer'])).code, 4);
});

test('gate 17: pidfence status and grant on PostgreSQL: grants through the owner URL, status as the runtime role', async (t) => {
  const database = await migratedDatabase('mgmt_cli');
  t.teardown(() => database.dispose());
  const viaRuntime = await pidfence([
    'grant',
    '--bootstrap',
    '--db',
    database.runtimeUrl,
    '--as',
    'root',
    'root',
    'proj',
    'grants.write',
  ]);
  t.is(viaRuntime.code, 4);
  t.regex(viaRuntime.stderr, /only the migration owner can.*ERR_PIDFENCE_GRANT_OWNER_ONLY/);
  // On PostgreSQL the principal is the login role: the owner administers, the runtime role reads.
  t.is(
    (await pidfence(['grant', '--bootstrap', '--db', database.ownerUrl, database.ownerRole, 'proj', 'grants.write']))
      .code,
    0,
  );
  t.is((await pidfence(['grant', '--db', database.ownerUrl, database.runtimeRole, 'proj', 'run.read'])).code, 0);
  t.is((await pidfence(['grant', '--db', database.ownerUrl, database.ownerRole, 'proj', 'run.read'])).code, 0);
  const impersonating = await pidfence(['status', '--project', 'proj'], {
    PIDFENCE_DB: database.runtimeUrl,
    PIDFENCE_PRINCIPAL: database.ownerRole,
  });
  t.is(impersonating.code, 4, 'the runtime role may not act as the owner');
  t.regex(impersonating.stderr, /ERR_PIDFENCE_IMPERSONATION_REFUSED/);
  const status = await pidfence(['status', '--project', 'proj', '--json'], { PIDFENCE_DB: database.runtimeUrl });
  t.is(status.code, 0, status.stderr);
  t.like(JSON.parse(status.stdout), { projectId: 'proj', assessment: 'clear', total: 0 });
});

test('gate 14: the principal is the OS user; --as and $PIDFENCE_PRINCIPAL grant no rights to a caller without grants.write, and impersonation is audited', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'pidfence.db');
  // The suite runs as root: bootstrap root, give viewer run.read only, and make a blocked run.
  t.is((await pidfence(['grant', '--bootstrap', '--db', db, 'root', 'proj', 'grants.write'])).code, 0);
  // The file's owner holds every grant (docs/decisions/0170): root must not be it here.
  disownStore(db);
  t.is((await pidfence(['grant', '--db', db, 'viewer', 'proj', 'run.read'])).code, 0);
  const store = openSqliteStore(db);
  const runId = await settle(store, 'proj', 'unsupported');
  store.close();
  // Make `admin` the administrator and take grants.write from root: root may no longer act as anyone.
  t.is((await pidfence(['grant', '--db', db, 'admin', 'proj', 'grants.write'])).code, 0);
  t.is((await pidfence(['grant', '--db', db, 'admin', 'proj', 'run.stop'])).code, 0);
  t.is((await pidfence(['grant', '--db', db, 'admin', 'proj', 'run.read'])).code, 0);
  t.is((await pidfence(['grant', '--revoke', '--db', db, 'root', 'proj', 'grants.write'])).code, 0);
  for (const attempt of [
    await pidfence(['inspect', runId, '--db', db, '--as', 'admin']),
    await pidfence(['status', '--db', db, '--project', 'proj'], { PIDFENCE_PRINCIPAL: 'admin' }),
    await pidfence(['grant', '--db', db, '--as', 'admin', 'root', 'proj', 'grants.write']),
  ]) {
    t.is(attempt.code, 4, attempt.stderr);
    t.regex(attempt.stderr, /root may not act as admin.*ERR_PIDFENCE_IMPERSONATION_REFUSED/);
  }
  // With grants.write back, root may act as viewer, and the audit says so.
  const reopened = openSqliteStore(db);
  await reopened.managementStore.writeGrant(
    { subject: 'root', projectId: 'proj', permission: 'grants.write' },
    'test-owner',
  );
  await reopened.managementStore.writeGrant(
    { subject: 'viewer', projectId: 'proj', permission: 'run.stop' },
    'test-owner',
  );
  reopened.close();
  const inspected = JSON.parse((await pidfence(['inspect', runId, '--db', db, '--json', '--as', 'viewer'])).stdout) as {
    version: number;
  };
  const rearmed = await pidfence([
    'rearm',
    runId,
    '--db',
    db,
    '--as',
    'viewer',
    '--expect-version',
    String(inspected.version),
    '--expect-result',
    'unsupported',
  ]);
  t.is(rearmed.code, 0, rearmed.stderr);
  const audit = openSqliteStore(db);
  t.teardown(() => audit.close());
  const actors = driverOf(audit.database)
    .prepare('SELECT actor FROM management_audit WHERE run_id = ?')
    .all(runId) as Array<{ actor: string }>;
  t.deepEqual(
    actors.map((row) => row.actor),
    ['root acting as viewer'],
  );
});
