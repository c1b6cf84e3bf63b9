// A runner process for the crash test: opens the store, admits the jobs named on argv (each a
// `sh -c` script), prints their ids, then idles until it is killed. argv: <dir> <script>...
import path from 'node:path';

import { createExecution } from '../../lib/execution/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';

async function main(): Promise<void> {
  const [dir, ...scripts] = process.argv.slice(2);
  if (dir === undefined) throw new Error('usage: runner-child <dir> <script>...');
  const store = openSqliteStore(path.join(dir, 'pidfence.db'));
  const app = createExecution({
    stores: {
      runStore: store.runStore,
      repository: store.dispatchRepository,
      executionStore: store.executionStore,
      runnerStore: store.runnerStore,
      close: () => store.close(),
    },
    receiptDirectory: path.join(dir, 'receipts'),
    graceMs: 300,
    keepAlive: true,
  });
  for (const script of scripts) {
    const admitted = await app.admit({ projectId: 'p1', command: 'sh', args: ['-c', script] });
    if (admitted.kind !== 'admitted') throw new Error('not admitted');
    process.stdout.write(`admitted ${admitted.runId} ${admitted.attemptId} ${admitted.status}\n`);
  }
  app.start();
  process.stdout.write('runner-ready\n');
}

void main();
