// The channel migration 0016's trigger notifies at every committed cancel intent, and the statement
// a control-plane replica listens on it with (docs/decisions/0201).
export const CANCEL_WAKEUP_CHANNEL = 'pidfence_cancel';

export const CANCEL_WAKEUP_SQL = {
  listen: `LISTEN ${CANCEL_WAKEUP_CHANNEL}`,
} as const;
