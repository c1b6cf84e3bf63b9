// How `pidfence` writes its answers (docs/decisions/0042, 0141): text facts for people, and under
// --json exactly one JSON document on stdout (a stream of one-line documents for `supervise`), with
// an error as one JSON line on stderr. Never a cause, stack, PID, handle or command.
import type { ErrorCategory } from '../base/error-registry';

/** Where a subcommand writes and what environment it reads: the process's, or a test's. */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
}

/** The answer of a one-shot command under --json: one document, the same facts as the text. */
export function writeJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One event of a long-running command (`supervise --json`): one complete JSON document per line. */
export function writeJsonLine(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value)}\n`);
}

/** Under --json an error is one JSON document on stderr: its code, category and sentence, never its cause. */
export function writeJsonError(io: CliIo, code: string, category: ErrorCategory, message: string): void {
  io.stderr.write(`${JSON.stringify({ error: { code, category, message } })}\n`);
}

/** Text lines `label  value`, aligned; the same facts the JSON carries. */
export function factLines(facts: ReadonlyArray<readonly [string, string | number | null]>): string {
  const width = Math.max(...facts.map(([label]) => label.length)) + 2;
  return facts.map(([label, value]) => `  ${label.padEnd(width)}${value === null ? '-' : String(value)}`).join('\n');
}

/** An epoch-ms fact as text: the number itself, then the ISO time for the reader. */
export function timeText(ms: number | null): string | null {
  return ms === null ? null : `${ms} (${new Date(ms).toISOString()})`;
}

/** Rows under a header, each column as wide as its widest cell; null cells print `-`. */
export function tableLines(
  header: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | number | null>>,
): string[] {
  const cells = [header, ...rows.map((row) => row.map((cell) => (cell === null ? '-' : String(cell))))];
  const widths = header.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  return cells.map(
    (row) =>
      `  ${row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd((widths[column] ?? 0) + 2))).join('')}`,
  );
}
