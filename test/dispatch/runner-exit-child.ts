// Child of the lifecycle-runner test: starts a runner with a one-minute cadence and does nothing
// else. It must exit by itself (the runner's only timer is unref'd); it prints its timer census.
import { LifecycleRunner } from '../../lib/dispatch/index';
import { timerCensus } from '../helpers/timer-census';

const census = timerCensus();
process.stdout.write(`timers-before-start ${census.created}\n`);
const runner = new LifecycleRunner({
  supervisor: { runCycle: async () => {} },
  cadenceMs: 60_000,
  initialDelayMs: 60_000,
});
process.stdout.write(`timers-after-construct ${census.created}\n`);
runner.start();
process.stdout.write(`timers-after-start ${census.created}\n`);
process.stdout.write(`state ${runner.state}\n`);
census.disable();
