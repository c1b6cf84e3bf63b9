// A job that could not be started at all (docs/decisions/0042): the launcher ends with the status
// shells use — 127 when the command is not there, 126 when it is there but cannot be executed — and
// says so in its receipt (`spawnFailed`). Kept apart so that the launcher loads no more than it needs.

export type StartFailure = 'command_not_found' | 'permission_denied';

/** The launcher's exit status for each, as `sh` and `bash` answer. */
export const START_FAILURE_STATUS: Readonly<Record<StartFailure, 126 | 127>> = {
  command_not_found: 127,
  permission_denied: 126,
};

/** The spawn errno as a start failure: found but not executable for this user, or not found (or not startable at all). */
export function startFailureOf(errno: string | undefined): StartFailure {
  return errno === 'EACCES' || errno === 'EPERM' || errno === 'ENOEXEC' ? 'permission_denied' : 'command_not_found';
}

/** Which start failure a launcher's exit status reports (only for a receipt marked spawnFailed). */
export function startFailureOfStatus(status: number | null): StartFailure {
  return status === START_FAILURE_STATUS.permission_denied ? 'permission_denied' : 'command_not_found';
}
