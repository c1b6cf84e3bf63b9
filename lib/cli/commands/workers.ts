// `pidfence workers` (docs/decisions/0245): the fleet as a control plane sees it — each worker's name,
// version, state, open sessions, last heartbeat age, leases held and capacity; `--json` for machines.
// Needs worker.read on @cluster. Never a PID, command, session id or run id.
import type { WorkerFleet } from '../../contract/index';
import { ageText } from '../../web/workers-page';
import { oneShotCommand, writeAnswer } from '../command';
import {
  addControlPlaneOptions,
  askControlPlane,
  fleetControlPlane,
  withControlPlane,
  type ControlPlaneOptions,
} from '../control-plane-target';
import { EXIT } from '../exit-codes';
import { tableLines } from '../output';

export function workersText(fleet: WorkerFleet): string {
  const rows = fleet.workers.map((worker) => [
    worker.name,
    worker.version,
    worker.state,
    worker.sessions,
    ageText(worker.lastHeartbeatAgeMs),
    worker.leasesHeld,
    worker.runsUnreachable,
    worker.capacity,
  ]);
  const header = `${fleet.workers.length} worker(s)${fleet.truncated ? ' (more not shown)' : ''}, as of ${new Date(fleet.asOfMs).toISOString()}`;
  return (
    [
      header,
      ...tableLines(
        ['worker', 'version', 'state', 'sessions', 'last heartbeat', 'leases', 'unreachable', 'capacity'],
        rows,
      ),
    ].join('\n') + '\n'
  );
}

export const workersCommand = oneShotCommand<ControlPlaneOptions & { readonly json?: boolean }>(
  'workers',
  "the cluster's workers: version, state, sessions, last heartbeat, leases held, capacity (needs worker.read on @cluster)",
  (command) =>
    addControlPlaneOptions(command, true).option('--json', 'machine-readable output (the same facts as the text)'),
  async (io, _arguments, options) => {
    const fleet = await withControlPlane(fleetControlPlane(options, io.env), (client) =>
      askControlPlane<WorkerFleet>(client, 'GET', '/v1/workers'),
    );
    writeAnswer(io, options.json, fleet, workersText);
    return EXIT.ok;
  },
);
