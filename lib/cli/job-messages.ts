// What `pidfence run` says about its job, shared so run and supervise say it alike
// (docs/decisions/0042, 0141): the stop hint that works from any directory, a job that could not start
// (exit 127 not found, 126 not executable, as shells do), and the line shown while a stop waits out its
// grace. Never the command itself.
import type { StartFailure } from '../execution/index';
import { DEFAULT_SQLITE_FILE, type StoreTarget } from './store-target';

/**
 * How the user called pidfence, to be called the same way again: `npx pidfence` when npx ran it
 * (npx marks its child with npm_lifecycle_event=npx and the command it ran; a bare `pidfence` is not
 * on PATH in a project that installed it), else `pidfence`. A pidfence started by another tool that
 * npx ran sees that tool's command, not its own.
 */
export function invokedAs(env: NodeJS.ProcessEnv): string {
  return env.npm_lifecycle_event === 'npx' && /^'?pidfence'?(\s|$)/.test(env.npm_lifecycle_script ?? '')
    ? 'npx pidfence'
    : 'pidfence';
}

/** `pidfence cancel RUN`, with `--db` whenever the store is not the default ./pidfence.db. */
export function stopHint(runId: string, dbOption: string | undefined, env: NodeJS.ProcessEnv = {}): string {
  const db = dbOption === undefined || dbOption === DEFAULT_SQLITE_FILE ? '' : ` --db ${shellQuote(dbOption)}`;
  return `${invokedAs(env)} cancel ${runId}${db}`;
}

/** Store names in messages: a file path as is; a URL without its password. */
export function storeName(target: StoreTarget): string {
  if (target.kind === 'sqlite') return target.file;
  try {
    const url = new URL(target.url);
    if (url.password !== '') url.password = '***';
    return url.toString();
  } catch {
    return 'the PostgreSQL store';
  }
}

/** A word a POSIX shell reads back as `text`. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./:@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

const START_FAILURE_MESSAGES: Readonly<Record<StartFailure, string>> = {
  command_not_found: 'command not found: check its name and $PATH (pidfence runs it without a shell).',
  permission_denied:
    'permission denied: the command is not an executable file for this user; check its mode and interpreter line.',
};

/** The sentence for a job that could not be started; it exits with START_FAILURE_STATUS, as shells do. */
export function jobStartFailureMessage(failure: StartFailure): string {
  return START_FAILURE_MESSAGES[failure];
}

/**
 * What a foreground run says on a terminal while a stop waits out its grace period, so the seconds
 * before the KILL are not silence; nothing when stderr is not a terminal (a log stays as it was).
 */
export function graceNotice(tty: boolean, runId: string, graceMs: number): string | null {
  if (!tty) return null;
  return `pidfence: stopping run ${runId}: TERM to its process group now, KILL in ${graceMs / 1_000}s if it is still running\n`;
}
