// SqliteRunnerStore (docs/decisions/0070): runner registration, the owner of an attempt, and
// adoption in one BEGIN IMMEDIATE transaction per batch.
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
import { boundaryOf, type SqliteBoundary, type WriteOptions } from './transaction';
import type { Clock } from './clock';
import type { SqliteDatabase } from './database';
import { RUNNER_SQL } from './runner-statements';
import type { Prepared } from './prepared';

type OwnerRow = Parameters<typeof runnerOf>[0] & { readonly attemptId: string };

export class SqliteRunnerStore implements RunnerStore {
  readonly #boundary: SqliteBoundary;
  readonly #sql: Prepared<typeof RUNNER_SQL>;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock } = {}) {
    this.#boundary = boundaryOf(database, options.clock);
    this.#sql = this.#boundary.sql(RUNNER_SQL);
  }

  #write<T>(operation: string, work: (nowMs: number) => T, options?: WriteOptions): T {
    return this.#boundary.write(operation, work, options);
  }

  #read<T>(operation: string, work: () => T): T {
    return this.#boundary.read(operation, work);
  }

  async registerRunner(command: RegisterRunnerCommand): Promise<void> {
    const valid = validateRegisterRunner(command);
    // A `cancel` that takes over an orphan registers to stop it: the stop path, which may spend the
    // disk reserve (docs/decisions/0191); a runner that starts jobs may not.
    this.#write('registerRunner', (nowMs) => this.#sql.registerRunner.run({ ...valid, nowMs }), {
      reserve: valid.kind === 'cancel',
    });
  }

  async endRunner(runnerId: string): Promise<void> {
    const id = validateId(runnerId, 'runnerId');
    this.#write('endRunner', (nowMs) => this.#sql.endRunner.run({ runnerId: id, nowMs }));
  }

  async activeAttemptOwner(
    runId: string,
  ): Promise<{ readonly attemptId: string; readonly runner: RunnerRecord | null } | null> {
    const id = validateId(runId, 'runId');
    const row = this.#read('activeAttemptOwner', () => this.#sql.activeAttemptOwner.get({ runId: id })) as
      OwnerRow | undefined;
    return row === undefined ? null : { attemptId: row.attemptId, runner: runnerOf(row) };
  }

  /** One runner of this journal by id; null when it has none (docs/decisions/0360). */
  async runnerRecord(runnerId: string): Promise<RunnerRecord | null> {
    const id = validateId(runnerId, 'runnerId');
    const row = this.#read('runnerRecord', () => this.#sql.runnerById.get({ runnerId: id })) as
      Parameters<typeof runnerOf>[0] | undefined;
    return row === undefined ? null : runnerOf(row);
  }

  async adoptionCandidates(query: {
    readonly hostId: string;
    readonly excludeRunnerId: string;
    readonly limit: number;
  }): Promise<RunnerRecord[]> {
    const valid = validateCandidatesQuery(query);
    const rows = this.#read('adoptionCandidates', () => this.#sql.adoptionCandidates.all(valid)) as Array<
      Parameters<typeof runnerOf>[0]
    >;
    return rows.map(runnerOf).filter((runner): runner is RunnerRecord => runner !== null);
  }

  async adoptAttempts(command: AdoptCommand): Promise<number> {
    const valid = validateAdoptCommand(command);
    return this.#write('adoptAttempts', (nowMs) => {
      const owned = this.#sql.ownedActiveAttempts.all({
        runnerId: valid.fromRunnerId,
        runId: valid.runId ?? null,
        limit: ADOPTION_BATCH_MAX,
      }) as Array<{ runId: string; attemptId: string }>;
      let adopted = 0;
      for (const { runId, attemptId } of owned) {
        const moved = this.#sql.transferAttempt.run({
          runId,
          attemptId,
          fromRunnerId: valid.fromRunnerId,
          toRunnerId: valid.toRunnerId,
          nowMs,
        });
        if (moved.changes !== 1) continue;
        this.#sql.insertAdoptionEvent.run({
          runId,
          attemptId,
          eventId: `evt-${randomUUID()}`,
          payload: adoptionPayload(valid.proof),
          nowMs,
        });
        adopted += 1;
      }
      return adopted;
    });
  }
}
