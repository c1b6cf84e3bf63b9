// The start gap on PostgreSQL (docs/decisions/0310): the same runner death between the attempt's
// commit and its handle's, on a database; the runners share one receipt directory of this host.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { migratedDatabaseForFile, type MigratedDatabase } from '../helpers/pg-store';
import { grantCancelOnPostgres } from './cli-runs';
import { cancelEndsIt, superviseEndsIt, type GapStore } from './start-gap-runs';

const ready = migratedDatabaseForFile(test, 'startgap');

async function postgresStore(t: ExecutionContext, db: MigratedDatabase): Promise<GapStore> {
  const receipts = mkdtempSync(path.join(tmpdir(), 'pidfence-gap-receipts-'));
  t.teardown(() => rmSync(receipts, { recursive: true, force: true }));
  await grantCancelOnPostgres(db.ownerUrl, db.runtimeRole);
  const row = async <R>(text: string, runId: string): Promise<R | undefined> =>
    (await db.owner.query(text, [runId])).rows[0] as R | undefined;
  return {
    db: db.runtimeUrl,
    env: { PIDFENCE_RECEIPTS: receipts },
    runStatus: async (runId) => (await row<{ status: string }>('SELECT status FROM runs WHERE id = $1', runId))?.status,
    endCause: async (runId) =>
      (
        await row<{ cause: string }>(
          "SELECT payload->>'cause' AS cause FROM attempt_events WHERE run_id = $1 AND type = 'attempt.terminal'",
          runId,
        )
      )?.cause,
  };
}

test.serial(
  'PostgreSQL: a run SIGKILLed between its attempt and its handle: cancel proves no job ran and ends it cancelled',
  async (t) => {
    await cancelEndsIt(t, await postgresStore(t, await ready));
  },
);

test.serial(
  'PostgreSQL: a run SIGKILLed between its attempt and its handle: a later supervise proves no job ran and ends it failed',
  async (t) => {
    await superviseEndsIt(t, await postgresStore(t, await ready));
  },
);
