// Child process of the replica crash tests (design/cluster §D3): one control-plane replica started with
// startControlPlane, as `pidfence control-plane` does, printing its wrapper observations (fixed states
// only) and, with a hold point, parking its first stop tick there (TEST-ONLY hooks) so the parent can
// SIGKILL it through the verified path, or until the parent releases it. The latch file makes only
// the first replica to claim park.
import { existsSync, openSync, readFileSync } from 'node:fs';

import { startControlPlane } from '../../lib/cluster/control-plane';
import type { DispatchControlTestHooks } from '../../lib/cluster/dispatch-control';

const [
  databaseUrl = '',
  certPath = '',
  keyPath = '',
  caPath = '',
  replicaId = '',
  dispatchLeaseMs = '',
  hold = 'none',
  latch = '',
  workerLeaseMs = '15000',
] = process.argv.slice(2);
const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** True for the one replica that creates the latch first. */
function firstToHold(): boolean {
  try {
    openSync(latch, 'wx');
    return true;
  } catch {
    return false;
  }
}

/** Parks the tick forever (until the parent kills this process) at `point`, once per test. */
function parkAt(point: 'after-claim' | 'after-settle'): () => Promise<void> {
  return () => {
    if (hold !== point || !firstToHold()) return Promise.resolve();
    say(`held ${point}`);
    return new Promise<void>(() => undefined);
  };
}

/** With hold `after-claim-until-released`: parks the first claim until the parent writes `<latch>.release`. */
function parkUntilReleased(): Promise<void> {
  if (hold !== 'after-claim-until-released' || !firstToHold()) return Promise.resolve();
  say('held after-claim');
  return new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (!existsSync(`${latch}.release`)) return;
      clearInterval(poll);
      say('released');
      resolve();
    }, 20);
  });
}

async function main(): Promise<void> {
  const testHooks: DispatchControlTestHooks = {
    afterClaim: async () => {
      await parkAt('after-claim')();
      await parkUntilReleased();
    },
    afterSettle: parkAt('after-settle'),
  };
  const plane = await startControlPlane({
    databaseUrl,
    tls: { cert: readFileSync(certPath), key: readFileSync(keyPath), ca: readFileSync(caPath) },
    replicaOwnerId: replicaId,
    dispatchLeaseMs: Number(dispatchLeaseMs),
    workerLeaseMs: Number(workerLeaseMs),
    observe: (observation) =>
      say(`observed ${observation.kind} ${observation.code ?? '-'} ${observation.scope ?? '-'}`),
    testHooks,
  });
  say(`listening on ${plane.url}`);
  process.once('SIGTERM', () => {
    void plane.close().then(() => say('closed'));
  });
}

main().catch((error: unknown) => say(`error ${(error as { code?: string }).code ?? 'unknown'}`));
