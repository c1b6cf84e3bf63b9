// The stores of the execution verbs (`run`, `cancel`, `supervise`): the SQLite file of the store
// target and its receipt directory beside it. PostgreSQL code is loaded only for a URL.
import { PidfenceError } from '../base/errors';
import type { ExecutionStores } from '../execution/index';
import type { StoreTarget } from './store-target';

export interface ExecutionTarget {
  readonly stores: ExecutionStores;
  /** Where the completion receipts of this store live on this host. */
  readonly receiptDirectory: string;
}

export async function executionTargetOpen(target: StoreTarget): Promise<ExecutionTarget> {
  if (target.kind === 'postgres') {
    throw new PidfenceError(
      'the local execution verbs run on a SQLite store for now; pass --db with a file path (PostgreSQL serves status, inspect and cancellation dispatch).',
      'ERR_PIDFENCE_EXECUTION_STORE_UNSUPPORTED',
    );
  }
  const { openSqliteStore } = await import('../store/sqlite/index');
  const store = openSqliteStore(target.file);
  return {
    stores: { runStore: store.runStore, repository: store.repository, executionStore: store.executionStore, close: () => store.close() },
    receiptDirectory: `${target.file}.receipts`,
  };
}
