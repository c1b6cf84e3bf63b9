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
import {
  activeAttemptOwnerSql,
  adoptionCandidatesSql,
  adoptionPayload,
  endRunnerSql,
  insertAdoptionEventSql,
  ownedActiveAttemptsSql,
  registerRunnerSql,
  runnerOf,
  transferAttemptSql,
} from '../runner-sql';
import { SqliteBoundary } from './transaction';
import type { Clock } from './clock';
import type { SqliteDatabase } from './database';
import { prepareSet, type Prepared } from './statements';

const SQL = {
  registerRunner: registerRunnerSql({ runnerId: ':runnerId', hostId: ':hostId', kind: ':kind', identity: ':identity', nowMs: ':nowMs' }),
  endRunner: endRunnerSql({ runnerId: ':runnerId', nowMs: ':nowMs' }),
  activeAttemptOwner: activeAttemptOwnerSql('r.identity', { runId: ':runId' }),
  adoptionCandidates: adoptionCandidatesSql('r.identity', { hostId: ':hostId', excludeRunnerId: ':excludeRunnerId', limit: ':limit' }),
  ownedActiveAttempts: ownedActiveAttemptsSql({ runnerId: ':runnerId', runId: ':runId', limit: ':limit' }),
  transferAttempt: transferAttemptSql({ runId: ':runId', attemptId: ':attemptId', fromRunnerId: ':fromRunnerId', toRunnerId: ':toRunnerId', nowMs: ':nowMs' }),
  insertAdoptionEvent: insertAdoptionEventSql({ runId: ':runId', attemptId: ':attemptId', eventId: ':eventId', payload: ':payload', nowMs: ':nowMs' }),
} as const;

type OwnerRow = Parameters<typeof runnerOf>[0] & { readonly attemptId: string };

export class SqliteRunnerStore implements RunnerStore {
  readonly #boundary: SqliteBoundary;
  readonly #sql: Prepared<typeof SQL>;

  constructor(database: SqliteDatabase, options: { readonly clock?: Clock } = {}) {
    this.#boundary = new SqliteBoundary(database, options.clock);
    this.#sql = prepareSet(database, SQL);
  }

  #write<T>(operation: string, work: (nowMs: number) => T): T {
    return this.#boundary.write(operation, work);
  }

  #read<T>(operation: string, work: () => T): T {
    return this.#boundary.read(operation, work);
  }

  async registerRunner(command: RegisterRunnerCommand): Promise<void> {
    const valid = validateRegisterRunner(command);
    this.#write('registerRunner', (nowMs) => this.#sql.registerRunner.run({ ...valid, nowMs }));
  }

  async endRunner(runnerId: string): Promise<void> {
    const id = validateId(runnerId, 'runnerId');
    this.#write('endRunner', (nowMs) => this.#sql.endRunner.run({ runnerId: id, nowMs }));
  }

  async activeAttemptOwner(runId: string): Promise<{ readonly attemptId: string; readonly runner: RunnerRecord | null } | null> {
    const id = validateId(runId, 'runId');
    const row = this.#read('activeAttemptOwner', () => this.#sql.activeAttemptOwner.get({ runId: id })) as OwnerRow | undefined;
    return row === undefined ? null : { attemptId: row.attemptId, runner: runnerOf(row) };
  }

  async adoptionCandidates(query: { readonly hostId: string; readonly excludeRunnerId: string; readonly limit: number }): Promise<RunnerRecord[]> {
    const valid = validateCandidatesQuery(query);
    const rows = this.#read('adoptionCandidates', () => this.#sql.adoptionCandidates.all(valid)) as Array<Parameters<typeof runnerOf>[0]>;
    return rows.map(runnerOf).filter((runner): runner is RunnerRecord => runner !== null);
  }

  async adoptAttempts(command: AdoptCommand): Promise<number> {
    const valid = validateAdoptCommand(command);
    return this.#write('adoptAttempts', (nowMs) => {
      const owned = this.#sql.ownedActiveAttempts.all({ runnerId: valid.fromRunnerId, runId: valid.runId ?? null, limit: ADOPTION_BATCH_MAX }) as Array<{ runId: string; attemptId: string }>;
      let adopted = 0;
      for (const { runId, attemptId } of owned) {
        const moved = this.#sql.transferAttempt.run({ runId, attemptId, fromRunnerId: valid.fromRunnerId, toRunnerId: valid.toRunnerId, nowMs });
        if (moved.changes !== 1) continue;
        this.#sql.insertAdoptionEvent.run({ runId, attemptId, eventId: `evt-${randomUUID()}`, payload: adoptionPayload(valid.proof), nowMs });
        adopted += 1;
      }
      return adopted;
    });
  }
}
