// The dispatch observer (docs/decisions/0110) on every store of stores.ts with real processes: what the
// dispatcher, the supervisor and the local controller tell it, and that a throwing observer changes
// no stop. The metrics adapter (prom-client) is one such observer; this file needs none.
import test from 'ava';

import { Supervisor, type DispatchObserver, type VerifiedSignal } from '../../lib/dispatch/index';
import { capabilities } from '../../lib/native/index';
import { LocalProcessController, formatHandle, handleFromIdentity } from '../../lib/process/index';
import { cancelledRun } from '../helpers/cancelled-runs';
import { storeFactories } from '../helpers/stores';
import { LEASE_MS, cancelledRunFor, dispatcherFor, startJob } from './world';

/** Every call, in order, with its arguments. */
function recordingObserver(): DispatchObserver & { readonly calls: Array<[string, ...unknown[]]> } {
  const calls: Array<[string, ...unknown[]]> = [];
  const record =
    (name: string) =>
    (...args: unknown[]) => {
      calls.push([name, ...args]);
    };
  return {
    calls,
    onClaim: record('onClaim'),
    onControllerAnswer: record('onControllerAnswer'),
    onSettled: record('onSettled'),
    onStaleFence: record('onStaleFence'),
    onCycle: record('onCycle'),
    onSignal: record('onSignal'),
    onCancelToExit: record('onCancelToExit'),
  };
}

for (const factory of storeFactories) {
  const name = factory.name;

  test(`the observer hears the claim, the controller's answer, each verified signal and the result with its claim+settle time; a replay is a dispatched claim [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    const target = await cancelledRunFor(store, job);
    const observer = recordingObserver();
    const signals: VerifiedSignal[] = [];
    const controller = new LocalProcessController({ onSignal: (signal) => signals.push(signal) });
    const dispatcher = dispatcherFor(store, [controller], { observer });
    const started = performance.now();
    t.like(await dispatcher.dispatch(target), { kind: 'recorded', result: 'termination_requested' });
    // Durations are in seconds: no more than the seconds the test itself saw pass (a unit check, not a speed check).
    const elapsedSeconds = (performance.now() - started) / 1000;
    t.like(await dispatcher.dispatch(target), { kind: 'not_claimed', claim: 'dispatched' });
    t.deepEqual(
      observer.calls.map(([method, first]) => [method, first]),
      [
        ['onClaim', 'claimed'],
        ['onControllerAnswer', 'termination_requested'],
        ['onSettled', 'termination_requested'],
        ['onClaim', 'dispatched'],
      ],
    );
    const seconds = observer.calls[2]?.[2] as number;
    t.true(seconds > 0 && seconds <= elapsedSeconds, `claim+settle took ${seconds} s of ${elapsedSeconds} s`);
    // TERM first, then CONT unless the job was already gone, each after its own proof, in the kernel's
    // group mode; no PID anywhere.
    t.deepEqual(signals[0] && [signals[0].signal, signals[0].mode], ['SIGTERM', capabilities().groupSignalMode]);
    t.true(
      signals.slice(1).every((signal) => signal.signal === 'SIGCONT' && signal.mode === capabilities().groupSignalMode),
    );
    t.true(signals.every((signal) => signal.seconds > 0 && signal.seconds <= elapsedSeconds));
    t.false(JSON.stringify([observer.calls, signals]).includes(String(job.identity.pid)));
    t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
  });

  test(`a refusal is heard as the controller's answer, and a result the fence refuses as a stale fence [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    // Another process's identity: the pidfs inode where the kernel gives one, else the start ticks.
    const { pidfsIno } = job.identity;
    const impostor = formatHandle(
      handleFromIdentity(
        pidfsIno === undefined
          ? { ...job.identity, startTicks: '1' }
          : { ...job.identity, pidfsIno: String(BigInt(pidfsIno) + 1n) },
      ),
    );
    const refused = await cancelledRun(store.runStore, { running: { pid: job.identity.pid, handle: impostor } });
    const observer = recordingObserver();
    await dispatcherFor(store, [new LocalProcessController()], { observer }).dispatch(refused);
    t.deepEqual(
      observer.calls.map(([method, first]) => [method, first]),
      [
        ['onClaim', 'claimed'],
        ['onControllerAnswer', 'identity_mismatch'],
        ['onSettled', 'identity_mismatch'],
      ],
    );
    t.is(job.child.exitCode, null, 'nothing was signalled');

    // The lease runs out while the controller works; another owner takes over and settles first.
    const target = await cancelledRunFor(store, job);
    const late = recordingObserver();
    const other = dispatcherFor(store, [new LocalProcessController()], { owner: 'worker-b' });
    const slow = dispatcherFor(store, [new LocalProcessController()], {
      owner: 'worker-a',
      observer: late,
      testHooks: {
        afterControllerCall: async () => {
          await store.advanceTime(LEASE_MS + 1);
          await other.dispatch(target);
        },
      },
    });
    t.like(await slow.dispatch(target), { kind: 'stale_fence' });
    t.deepEqual(
      late.calls.map(([method]) => method),
      ['onClaim', 'onControllerAnswer', 'onStaleFence'],
    );
  });

  test(`the supervisor tells each cycle and whether it failed; a throwing observer changes no dispatch [${name}]`, async (t) => {
    const store = await factory.open();
    t.teardown(() => store.close());
    const job = startJob(t);
    await cancelledRunFor(store, job);
    const cycles: boolean[] = [];
    const throwing: Partial<DispatchObserver> = {
      onCycle: (failed) => {
        cycles.push(failed);
        throw new Error('observer bug');
      },
      onClaim: () => {
        throw new Error('observer bug');
      },
      onSettled: () => {
        throw new Error('observer bug');
      },
    };
    // Its own connection, so the test can close it under the supervisor.
    const connection = await factory.attach(store.location);
    const dispatcher = dispatcherFor(connection, [new LocalProcessController()], { observer: throwing });
    const supervisor = new Supervisor({ repository: connection.repository, dispatcher, observer: throwing });
    t.like(await supervisor.runCycle(), { dispatched: 1, staleFence: 0 });
    t.deepEqual(await job.exited, { code: null, signal: 'SIGTERM' });
    t.deepEqual(cycles, [false]);
    await connection.close();
    await t.throwsAsync(supervisor.runCycle());
    t.deepEqual(cycles, [false, true], 'a cycle the closed store failed is told as failed');
  });
}
