// Exit codes of the `pidfence` command, one home for all of them (documented in docs/cli.md).
export const EXIT = {
  ok: 0,
  /** An unexpected failure (a bug): the only case that prints a stack trace. */
  failure: 1,
  /** Bad arguments: one line saying why, then the usage. */
  usage: 2,
  /** The store could not be reached or is not ready (schema, checksums, privileges). */
  storeUnavailable: 3,
  /** The request was understood and refused: not found, not permitted, stale fence. */
  refused: 4,
  /** `status`: something is in flight, nothing blocked. */
  converging: 10,
  /** `status`: something is blocked or overdue. */
  attentionRequired: 20,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
