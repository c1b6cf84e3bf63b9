// Listening for the cancel wake-ups migration 0016's trigger sends (docs/decisions/0201): the cluster's
// waiting lease pages use them as a hint to read again; the statement is in cancel-wakeup-statements.ts.
import type { Client, Notification } from 'pg';

import { CANCEL_WAKEUP_CHANNEL, CANCEL_WAKEUP_SQL } from './cancel-wakeup-statements';

/** Subscribes this connection to the cancel wake-ups. */
export async function listenForCancelWakeups(client: Client): Promise<void> {
  await client.query(CANCEL_WAKEUP_SQL.listen);
}

/** The run id a notification wakes, or null when it is not a cancel wake-up. */
export function cancelWakeupRunId(message: Notification): string | null {
  return message.channel === CANCEL_WAKEUP_CHANNEL && message.payload !== undefined ? message.payload : null;
}
