// A runner held in its start window, for the start-gap tests (docs/decisions/0310): it admits one
// job through the product's admission on the store named by argv (a SQLite file or a PostgreSQL
// URL, as `--db` takes it), but its store never answers the commit of the attempt's handle (the
// move to `running`): it prints `paused <runId>` there and waits to be killed. The pause is in this
// test program's store wrapper only; no product code has it. argv: <db> <mark> <script>
import { resolveStoreTarget } from '../../lib/cli/store-target';
import { openExecutionTarget } from '../../lib/cli/execution-target';
import { createExecution } from '../../lib/execution/index';
import type { AdvanceAttemptCommand, AdvanceAttemptOutcome } from '../../lib/contract/index';
import { MARK_ENV } from '../helpers/marked-processes';
import { overriding } from './world';

async function main(): Promise<void> {
  const [db, mark, script] = process.argv.slice(2);
  if (db === undefined || mark === undefined || script === undefined)
    throw new Error('usage: start-gap-child <db> <mark> <script>');
  const target = await openExecutionTarget(resolveStoreTarget(db));
  const { runStore } = target.stores;
  const advance = runStore.advanceAttempt.bind(runStore);
  const paused = (command: AdvanceAttemptCommand): Promise<AdvanceAttemptOutcome> => {
    if (command.to !== 'running') return advance(command);
    process.stdout.write(`paused ${command.runId}\n`);
    return new Promise<never>(() => undefined);
  };
  const app = createExecution({
    stores: { ...target.stores, runStore: overriding(runStore, { advanceAttempt: paused }) },
    receiptDirectory: target.receiptDirectory,
    graceMs: 300,
    runnerKind: 'run',
  });
  // Alive until killed: the admission below never returns.
  setInterval(() => undefined, 60_000);
  await app.admit({
    projectId: 'default',
    command: 'sh',
    args: ['-c', script],
    env: { ...process.env, [MARK_ENV]: mark },
  });
}

void main();
