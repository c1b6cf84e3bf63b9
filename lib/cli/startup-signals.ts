// Start-up signals (docs/decisions/0162): `run` and `supervise` drain on SIGINT/SIGTERM/SIGHUP, but
// their handlers can act only once the store is open and the runner exists. This module is the CLI
// entry's first import: for those two commands it takes the signals at once and holds them, and the
// command routes them to its drain when it is ready. Other commands keep the default behaviour.
import path from 'node:path';

/** The signals each draining command stops on (a closed terminal, SIGHUP, stops a foreground run only). */
export const STOP_SIGNALS: Readonly<Record<'run' | 'supervise', readonly NodeJS.Signals[]>> = {
  run: ['SIGINT', 'SIGTERM', 'SIGHUP'],
  supervise: ['SIGINT', 'SIGTERM'],
};

type SignalHandler = (signal: NodeJS.Signals) => void;

const pending: NodeJS.Signals[] = [];
let route: SignalHandler | null = null;
let holding: readonly NodeJS.Signals[] = [];

function held(signal: NodeJS.Signals): void {
  if (route === null) pending.push(signal);
  else route(signal);
}

/** The command `argv` names (the first word that is not an option), if any. */
function commandOf(argv: readonly string[]): string | undefined {
  return argv.find((word) => !word.startsWith('-'));
}

/** Holds the stop signals from now on when `argv` is a command that drains on them. */
export function holdStartupSignals(argv: readonly string[]): void {
  const command = commandOf(argv);
  if (holding.length > 0 || (command !== 'run' && command !== 'supervise')) return;
  hold(STOP_SIGNALS[command]);
}

function hold(signals: readonly NodeJS.Signals[]): void {
  holding = signals;
  for (const signal of signals) process.on(signal, held);
}

/**
 * The command is ready: signals held so far are delivered to `handler` now (in arrival order), later
 * ones as they come. The returned function gives the signals back to their default behaviour.
 * Without a hold (a test calling the command directly) the handler is installed the same way.
 */
export function routeSignals(signals: readonly NodeJS.Signals[], handler: SignalHandler): () => void {
  if (holding.length === 0) hold(signals);
  route = handler;
  for (let signal = pending.shift(); signal !== undefined; signal = pending.shift()) handler(signal);
  return () => {
    route = null;
    pending.length = 0;
    for (const signal of holding) process.removeListener(signal, held);
    holding = [];
  };
}

// The CLI entry (lib/cli/main.ts) imports this module first: hold before anything else loads.
if (require.main !== undefined && require.main.filename === path.join(__dirname, 'main.js'))
  holdStartupSignals(process.argv.slice(2));
