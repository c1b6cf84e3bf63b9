// The launcher's order (docs/decisions/0071): what it needs to start the job and sign its receipt,
// sent as one JSON document on a pipe at a fixed descriptor. Kept apart from launcher.ts so that the
// launcher process loads no more than it needs.

/** The launcher's file descriptor that carries its LaunchOrder. */
export const LAUNCH_ORDER_FD = 3;

export interface LaunchOrder {
  readonly receiptDirectory: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly seq: number;
  readonly token: string;
  readonly command: string;
  readonly args: readonly string[];
}
