// The management plane's refusals (design/dispatch §5.1-5.4): each a PidfenceError with a stable code
// and a sentence that says what to do next. Input mistakes stay PidfenceType/RangeErrors.
import { PidfenceError } from '../base/errors';

export type ManagementErrorCode =
  | 'ERR_PIDFENCE_NOT_PERMITTED'
  | 'ERR_PIDFENCE_RUN_NOT_FOUND'
  | 'ERR_PIDFENCE_RUN_FINISHED'
  | 'ERR_PIDFENCE_IMPERSONATION_REFUSED'
  | 'ERR_PIDFENCE_REARM_STALE'
  | 'ERR_PIDFENCE_REARM_NOT_BLOCKED'
  | 'ERR_PIDFENCE_REARM_RESULT_MISMATCH'
  | 'ERR_PIDFENCE_SUMMARY_INCONSISTENT'
  | 'ERR_PIDFENCE_CURSOR_PROJECT'
  | 'ERR_PIDFENCE_CURSOR_FILTER';

export class ManagementError extends PidfenceError {
  declare readonly code: ManagementErrorCode;

  constructor(message: string, code: ManagementErrorCode) {
    super(message, code);
    this.name = 'ManagementError';
  }
}
