// The due page as both dispatch stores answer it (design/dispatch §2.6, docs/decisions/0022): the cursor
// before every key and the page made of the rows the due query returned. The rules that decide a
// claim or a settle are each dialect's own (docs/decisions/0231).
import type { DueCursor, DueItem, DuePage } from '../contract/index';

/** Cursor position before every real key (times are >= 0, ids are non-empty). */
export const FIRST_DUE_CURSOR: DueCursor = { atMs: -1, runId: '' };

/** A due page from at most `limit` rows in keyset order: `next` only when the page is full. */
export function duePageOf(rows: readonly DueItem[], limit: number): DuePage {
  const last = rows[rows.length - 1];
  return {
    items: rows.map((row) => ({
      runId: row.runId,
      attemptId: row.attemptId,
      cancelRequestedAtMs: row.cancelRequestedAtMs,
      source: row.source,
      atMs: row.atMs,
    })),
    next: rows.length === limit && last !== undefined ? { atMs: last.atMs, runId: last.runId } : null,
  };
}
