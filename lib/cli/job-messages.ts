// What `pidfence run` says about its job, shared so run and supervise say it alike
// (docs/decisions/0042): the stop hint that works from any directory, and a job that could not start
// with the exit status shells use (127 not found, 126 not executable). Never the command itself.
import { DEFAULT_SQLITE_FILE, type StoreTarget } from './store-target';

/** `pidfence cancel RUN`, with `--db` whenever the store is not the default ./pidfence.db. */
export function stopHint(runId: string, dbOption: string | undefined): string {
  const db = dbOption === undefined || dbOption === DEFAULT_SQLITE_FILE ? '' : ` --db ${shellQuote(dbOption)}`;
  return `pidfence cancel ${runId}${db}`;
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

function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./:@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

export interface JobStartFailure {
  /** The shell's status for it: 127 command not found, 126 found but not executable. */
  readonly exitStatus: 126 | 127;
  readonly message: string;
}

/** A spawn errno as the shell would report it; undefined for errors that are not about the command. */
export function jobStartFailure(errno: string | undefined): JobStartFailure | undefined {
  if (errno === 'ENOENT') return { exitStatus: 127, message: 'command not found: check its name and $PATH (pidfence runs it without a shell).' };
  if (errno === 'EACCES' || errno === 'EPERM' || errno === 'ENOEXEC') {
    return { exitStatus: 126, message: `permission denied (${errno}): the command is not an executable file for this user; check its mode and interpreter line.` };
  }
  return undefined;
}
