-- 0010: the store clock's per-boot anchor (docs/decisions/0160). Every process of one boot reads
-- now = anchor_wall_ms + (CLOCK_BOOTTIME - anchor_boot_ms): the same reading everywhere, never
-- stepped by the wall clock. A new boot's anchor is never below any time the store already holds.

CREATE TABLE store_clock_anchors (
  boot_id         TEXT    NOT NULL PRIMARY KEY CHECK (length(boot_id) = 36),
  -- The store time at the anchor: the wall clock then, or later than every time written before.
  anchor_wall_ms  INTEGER NOT NULL CHECK (anchor_wall_ms >= 0),
  -- CLOCK_BOOTTIME (ms) at the anchor, in this boot.
  anchor_boot_ms  INTEGER NOT NULL CHECK (anchor_boot_ms >= 0),
  -- The wall clock when the anchor was taken (for people: how far the store time was set ahead).
  created_wall_ms INTEGER NOT NULL CHECK (created_wall_ms >= 0)
) STRICT, WITHOUT ROWID;
