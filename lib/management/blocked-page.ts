// blockedPage(projectId, cursor?) (design/dispatch §5.4, gate 18): one fixed page of 16 blocked dispatches,
// run id and blocked time only, in (blockedAtMs, runId) order. The cursor pins the first page's
// database time and its project; pages are read one at a time, on request.
import {
  BLOCKED_PAGE_SIZE,
  decodeBlockedCursor,
  encodeBlockedCursor,
  validateId,
  type BlockedItem,
} from '../contract/index';
import type { BlockedPosition, ManagementStore } from '../store/management-store';
import { authorize, type Principal } from './authorization';
import { ManagementError } from './errors';

export interface BlockedPage {
  readonly projectId: string;
  /** The first page's database time: no row blocked after it appears on any page of this walk. */
  readonly asOfMs: number;
  readonly items: readonly BlockedItem[];
  /** Pass to the next call for the next page; null on the last page. */
  readonly next: string | null;
}

export async function blockedPage(
  store: ManagementStore,
  principal: Principal,
  projectId: string,
  cursor?: string,
): Promise<BlockedPage> {
  const id = validateId(projectId, 'projectId');
  let position: BlockedPosition = { kind: 'first' };
  if (cursor !== undefined) {
    const decoded = decodeBlockedCursor(cursor);
    if (decoded.projectId !== id) {
      throw new ManagementError(
        `this cursor belongs to another project's blocked list, not ${id}; start again without a cursor.`,
        'ERR_PIDFENCE_CURSOR_PROJECT',
      );
    }
    position = { kind: 'after', asOfMs: decoded.asOfMs, after: decoded.after };
  }
  await authorize(store, principal, id, 'run.read');
  // One row more than a page tells whether another page exists, without a second query.
  const { asOfMs, rows } = await store.blockedRows(id, position, BLOCKED_PAGE_SIZE + 1);
  const items = rows.slice(0, BLOCKED_PAGE_SIZE).map((row) => ({ runId: row.runId, blockedAtMs: row.blockedAtMs }));
  const last = items[items.length - 1];
  const next =
    rows.length > BLOCKED_PAGE_SIZE && last !== undefined
      ? encodeBlockedCursor({ projectId: id, asOfMs, after: last })
      : null;
  return { projectId: id, asOfMs, items, next };
}
