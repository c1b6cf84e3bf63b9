// Counts the timers (setTimeout/setInterval, ref'd or not) created while it is enabled, through
// async_hooks: getActiveResourcesInfo() does not list unref'd timers, this does.
import { createHook } from 'node:async_hooks';

export interface TimerCensus {
  readonly created: number;
  disable(): void;
}

export function timerCensus(): TimerCensus {
  let created = 0;
  const hook = createHook({ init(_id, type) { if (type === 'Timeout') created += 1; } }).enable();
  return {
    get created() { return created; },
    disable: () => { hook.disable(); },
  };
}
