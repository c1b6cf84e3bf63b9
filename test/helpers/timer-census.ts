// Counts the timers (setTimeout/setInterval, ref'd or not) created while it is enabled, through
// async_hooks: getActiveResourcesInfo() does not list unref'd timers, this does. It also counts
// file-system watchers (fs.watch, fs.watchFile) and, per timer, the file that called setTimeout,
// so a test can tell the product's timers from a driver's (pg's pool) or the test runner's.
// Process-wide: tests that use it run test.serial.
import { createHook } from 'node:async_hooks';

export interface TimerCensus {
  readonly created: number;
  /** Timers created by a caller whose file path matches `origin` (all of them without one). */
  readonly createdFromOrigin: number;
  /**
   * Of those, how many exist now (neither fired nor cleared). async_hooks reports a timer's end
   * asynchronously: let the event loop turn (a short delay) before reading this.
   */
  readonly liveFromOrigin: number;
  /** fs.watch / fs.watchFile handles created while enabled. */
  readonly watchers: number;
  disable(): void;
}

const WATCHER_TYPES = new Set(['FSEVENTWRAP', 'STATWATCHER']);

/** The file of the first stack frame outside node's internals and this helper: the caller of setTimeout. */
function callerFile(): string {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 30;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  for (const line of stack.split('\n').slice(1)) {
    if (/node:|timer-census/.test(line)) continue;
    return line;
  }
  return '';
}

export function timerCensus(options: { readonly origin?: RegExp } = {}): TimerCensus {
  let created = 0;
  let createdFromOrigin = 0;
  let watchers = 0;
  const live = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (WATCHER_TYPES.has(type)) watchers += 1;
      if (type !== 'Timeout') return;
      created += 1;
      if (options.origin !== undefined && !options.origin.test(callerFile())) return;
      createdFromOrigin += 1;
      live.add(id);
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return {
    get created() {
      return created;
    },
    get createdFromOrigin() {
      return createdFromOrigin;
    },
    get liveFromOrigin() {
      return live.size;
    },
    get watchers() {
      return watchers;
    },
    disable: () => {
      hook.disable();
    },
  };
}
