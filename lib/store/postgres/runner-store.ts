// PostgresRunnerStore (docs/decisions/0070): runner registration, the owner of an attempt, and
// adoption in one transaction per batch; transaction_timestamp() is the only clock.
import type { Pool } from 'pg';

import { randomUUID } from 'node:crypto';

import {
  type AdoptCommand,
  ADOPTION_BATCH_MAX,
  type RegisterRunnerCommand,
  type RunnerRecord,
  validateAdoptCommand,
  validateCandidatesQuery,
  validateId,
  validateRegisterRunner,
} from '../../contract/index';
import { type RunnerStore } from '../runner-store';
import { adoptionPayload, runnerOf } from '../runner-rows';
import { RUNNER_SQL } from './runner-statements';
import { inTransaction } from './transaction';

type OwnerRow = Parameters<typeof runnerOf>[0] & { readonly attemptId: string };

export class PostgresRunnerStore implements RunnerStore {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async registerRunner(command: RegisterRunnerCommand): Promise<void> {
    const v = validateRegisterRunner(command);
    await inTransaction(this.#pool, 'registerRunner', (tx) =>
      tx.rows(RUNNER_SQL.registerRunner, [v.runnerId, v.hostId, v.kind, v.identity]),
    );
  }

  async endRunner(runnerId: string): Promise<void> {
    const id = validateId(runnerId, 'runnerId');
    await inTransaction(this.#pool, 'endRunner', (tx) => tx.rows(RUNNER_SQL.endRunner, [id]));
  }

  async activeAttemptOwner(
    runId: string,
  ): Promise<{ readonly attemptId: string; readonly runner: RunnerRecord | null } | null> {
    const id = validateId(runId, 'runId');
    const [row] = await inTransaction(this.#pool, 'activeAttemptOwner', (tx) =>
      tx.rows<OwnerRow>(RUNNER_SQL.activeAttemptOwner, [id]),
    );
    return row === undefined ? null : { attemptId: row.attemptId, runner: runnerOf(row) };
  }

  async adoptionCandidates(query: {
    readonly hostId: string;
    readonly excludeRunnerId: string;
    readonly limit: number;
  }): Promise<RunnerRecord[]> {
    const v = validateCandidatesQuery(query);
    const rows = await inTransaction(this.#pool, 'adoptionCandidates', (tx) =>
      tx.rows<Parameters<typeof runnerOf>[0]>(RUNNER_SQL.adoptionCandidates, [v.hostId, v.excludeRunnerId, v.limit]),
    );
    return rows.map(runnerOf).filter((runner): runner is RunnerRecord => runner !== null);
  }

  async adoptAttempts(command: AdoptCommand): Promise<number> {
    const v = validateAdoptCommand(command);
    return inTransaction(this.#pool, 'adoptAttempts', async (tx) => {
      const owned = await tx.rows<{ runId: string; attemptId: string }>(RUNNER_SQL.ownedActiveAttempts, [
        v.fromRunnerId,
        v.runId ?? null,
        ADOPTION_BATCH_MAX,
      ]);
      let adopted = 0;
      for (const { runId, attemptId } of owned) {
        const moved = await tx.rows(RUNNER_SQL.transferAttempt, [runId, attemptId, v.fromRunnerId, v.toRunnerId]);
        if (moved.length !== 1) continue;
        await tx.rows(RUNNER_SQL.insertAdoptionEvent, [
          runId,
          attemptId,
          `evt-${randomUUID()}`,
          adoptionPayload(v.proof),
        ]);
        adopted += 1;
      }
      return adopted;
    });
  }
}
