// What a pg pool's connections say on the wire, for benchmarks and tests that count database cost: one
// ReadyForQuery ends each round trip, one CommandComplete each statement the server ran, told apart
// by its command tag into transaction control (BEGIN, COMMIT, ROLLBACK, SET) and the rest.
import type { EventEmitter } from 'node:events';

import type { Pool } from 'pg';

export interface WireTally {
  roundTrips: number;
  statements: number;
  transactionControl: number;
}

const TRANSACTION_CONTROL = /^(BEGIN|COMMIT|ROLLBACK|SET)\b/;

/** Tallies every connection `pool` opens from now on; read the returned object, or diff two copies of it. */
export function tallyWire(pool: Pool): WireTally {
  const tally: WireTally = { roundTrips: 0, statements: 0, transactionControl: 0 };
  pool.on('connect', (client) => {
    const wire = (client as unknown as { connection: EventEmitter }).connection;
    wire.on('readyForQuery', () => {
      tally.roundTrips += 1;
    });
    wire.on('commandComplete', (message: { text?: string }) => {
      if (TRANSACTION_CONTROL.test(message.text ?? '')) tally.transactionControl += 1;
      else tally.statements += 1;
    });
  });
  return tally;
}

/** `after - before`, field by field. */
export function wireSince(before: WireTally, after: WireTally): WireTally {
  return {
    roundTrips: after.roundTrips - before.roundTrips,
    statements: after.statements - before.statements,
    transactionControl: after.transactionControl - before.transactionControl,
  };
}
