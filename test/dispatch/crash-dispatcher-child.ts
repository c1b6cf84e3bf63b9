// Child process of the crash-window test (design/dispatch §2.5): one dispatcher against the shared store,
// with the TEST-ONLY hooks reporting its fence and holding the dispatch after the controller call,
// so the parent can kill this process (verified SIGKILL) before the result commits.
import { ControllerRegistry, Dispatcher } from '../../lib/dispatch/index';
import { LocalProcessController } from '../../lib/process/index';
import { storeFactory } from '../helpers/stores';

const [storeName = '', location = '', runId = '', attemptId = '', cancelAt = '', graceMs = '', leaseMs = ''] =
  process.argv.slice(2);
const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
process.on('uncaughtException', (error) => {
  say(`error ${(error as { code?: string }).code ?? error.name}`);
  process.exit(1);
});

async function main(): Promise<void> {
  const connection = await storeFactory(storeName).attach(location);
  const dispatcher = new Dispatcher({
    repository: connection.repository,
    runStore: connection.runStore,
    controllers: new ControllerRegistry([new LocalProcessController()]),
    owner: 'crash-owner',
    graceMs: Number(graceMs),
    leaseDurationMs: Number(leaseMs),
    testHooks: {
      // The fence goes to the parent only so it can replay this owner's result late.
      afterClaim: (fence) => say(`fence ${JSON.stringify(fence)}`),
      afterControllerCall: (_fence, result) => {
        say(`after-controller ${result}`);
        setInterval(() => {}, 60_000); // keep the process alive, parked before the commit
        return new Promise<void>(() => {});
      },
    },
  });
  say('ready');
  const outcome = await dispatcher.dispatch({ runId, attemptId, cancelRequestedAtMs: Number(cancelAt) });
  say(`unexpected ${outcome.kind}`);
}

main().catch((error: unknown) => say(`error ${(error as { code?: string }).code ?? 'unknown'}`));
