// A child process for the two-process claim race (design/dispatch §6 gate 1): it opens the SQLite file
// itself, then for each `<runId> <attemptId> <cancelRequestedAtMs>` line on stdin claims once.
import { createInterface } from 'node:readline';

import { createLeaseToken } from '../../lib/contract/index';
import { openSqliteStore } from '../../lib/store/sqlite/index';

const [filename, owner] = process.argv.slice(2);
if (filename === undefined || owner === undefined) throw new Error('usage: claim-racer-child <db file> <owner>');
const store = openSqliteStore(filename, { migrate: false });
const lines = createInterface({ input: process.stdin });

lines.on('line', (line) => {
  const [runId = '', attemptId = '', at = ''] = line.split(' ');
  store.dispatchRepository
    .claim({
      runId,
      attemptId,
      cancelRequestedAtMs: Number(at),
      owner,
      token: createLeaseToken(),
      leaseDurationMs: 60_000,
    })
    .then((outcome) => process.stdout.write(`${runId} ${outcome.kind}\n`))
    .catch((error: unknown) =>
      process.stdout.write(`${runId} error:${(error as { code?: string }).code ?? 'unknown'}\n`),
    );
});
lines.on('close', () => store.close());
process.stdout.write('ready\n');
