// The SQLite store clock's statements (docs/decisions/0160): the boot anchors of the boot-anchored clock
// and the latest time the store holds, which a new boot's anchor never goes below.

export const CLOCK_SQL = {
  /**
   * The latest time the store holds, lease expiries and retry due times included (deadlines are not:
   * an old boot's jobs are gone, and a long timeout must not push the clock ahead by hours). A table
   * that holds times belongs in this list.
   */
  highWater: `SELECT MAX(t) AS high FROM (
  SELECT MAX(updated_at_ms) AS t FROM runs
  UNION ALL SELECT MAX(updated_at_ms) FROM attempts
  UNION ALL SELECT MAX(MAX(updated_at_ms, COALESCE(lease_expires_at_ms, 0), COALESCE(next_attempt_at_ms, 0))) FROM cancellation_dispatches
  UNION ALL SELECT MAX(created_at_ms) FROM run_events
  UNION ALL SELECT MAX(created_at_ms) FROM attempt_events
  UNION ALL SELECT MAX(MAX(started_at_ms, COALESCE(ended_at_ms, 0))) FROM runners
  UNION ALL SELECT MAX(MAX(created_at_ms, COALESCE(done_at_ms, 0))) FROM receipt_journal
  UNION ALL SELECT MAX(created_at_ms) FROM management_audit
  UNION ALL SELECT MAX(created_at_ms) FROM management_grants
  UNION ALL SELECT MAX(anchor_wall_ms) FROM store_clock_anchors
)`,

  /** The wall-minus-boot offset anchored for one boot. */
  offset: 'SELECT anchor_wall_ms - anchor_boot_ms AS offset FROM store_clock_anchors WHERE boot_id = ?',
  insertAnchor:
    'INSERT INTO store_clock_anchors (boot_id, anchor_wall_ms, anchor_boot_ms, created_wall_ms) VALUES (?, ?, ?, ?)',
} as const;
