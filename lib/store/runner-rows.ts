// What the SQLite and PostgreSQL runner stores share besides SQL text (docs/decisions/0070): the
// adoption event's payload and the row mapper. The SQL text is in runner-statements.ts (docs/decisions/0410).
import type { AdoptionProof, RunnerKind, RunnerRecord } from '../contract/index';

/**
 * Low-sensitivity: how the previous owner (the runner process, not the job) was proved gone; never a
 * runner id or PID. Keyed `runner` (docs/decisions/0272): the key `proof` read as the job's end, and
 * `proof=exited` beside a job that was alive and running was taken for a false proof.
 */
export function adoptionPayload(proof: AdoptionProof): string {
  return JSON.stringify({ runner: proof });
}

export function runnerOf(row: {
  readonly runnerId: string | null;
  readonly hostId: string | null;
  readonly kind: string | null;
  readonly identity: string | null;
  readonly startedAtMs: number | string | null;
  readonly endedAtMs: number | string | null;
}): RunnerRecord | null {
  if (
    row.runnerId === null ||
    row.hostId === null ||
    row.kind === null ||
    row.identity === null ||
    row.startedAtMs === null
  )
    return null;
  return {
    runnerId: row.runnerId,
    hostId: row.hostId,
    kind: row.kind as RunnerKind,
    identity: row.identity,
    startedAtMs: Number(row.startedAtMs),
    endedAtMs: row.endedAtMs === null ? null : Number(row.endedAtMs),
  };
}
