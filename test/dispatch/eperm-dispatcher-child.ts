// Child process of the controller-failure test, run under another uid than the job it must stop:
// the real LocalProcessController's signal gets EPERM from the kernel. One LifecycleRunner over a
// Supervisor and Dispatcher on the shared SQLite file; prints the diagnostics it received as JSON.
import {
  ControllerRegistry,
  Dispatcher,
  LifecycleRunner,
  Supervisor,
  type DiagnosticRecord,
} from '../../lib/dispatch/index';
import { LocalProcessController } from '../../lib/process/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';
import { GRACE_MS, LEASE_MS } from './world';

const [file = ''] = process.argv.slice(2);

async function main(): Promise<void> {
  const store = openSqliteStore(file, { migrate: false });
  const records: DiagnosticRecord[] = [];
  const dispatcher = new Dispatcher({
    repository: store.dispatchRepository,
    runStore: store.runStore,
    controllers: new ControllerRegistry([new LocalProcessController()]),
    graceMs: GRACE_MS,
    leaseDurationMs: LEASE_MS,
  });
  const runner = new LifecycleRunner({
    supervisor: new Supervisor({ repository: store.dispatchRepository, dispatcher }),
    cadenceMs: 100,
    diagnostics: (record) => records.push(record),
  });
  runner.start();
  const deadline = Date.now() + 10_000;
  while (records.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  await runner.stop();
  store.close();
  process.stdout.write(`${JSON.stringify({ uid: process.getuid?.(), records })}\n`);
}

main().catch((error: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: (error as { code?: string }).code ?? String(error) })}\n`);
  process.exit(1);
});
