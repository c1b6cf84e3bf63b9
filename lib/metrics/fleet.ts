// The fleet's metrics (docs/decisions/0245): workers by state, leases held, announced capacity, open
// sessions and the oldest heartbeat, read at scrape time through the one fleet read, and the requests
// the control plane refused or held back by reason. Counts only: a worker's name is never a label.
import { Counter, Gauge, type Registry } from 'prom-client';

import { FLEET_REFUSALS, WORKER_STATES, type WorkerFleet } from '../contract/index';

export interface FleetMetrics {
  readonly observer: { onRefusal(reason: string): void };
  /** Reads the fleet once and sets the gauges; on failure the gauges go away rather than go stale. */
  refresh(): Promise<void>;
}

export function registerFleetMetrics(registry: Registry, readFleet: () => Promise<WorkerFleet>): FleetMetrics {
  const gauges = fleetGauges([registry]);
  const refusals = fleetRefusals([registry]);
  return {
    observer: {
      onRefusal: (reason) => {
        if ((FLEET_REFUSALS as readonly string[]).includes(reason)) refusals.inc({ reason });
      },
    },
    async refresh() {
      let fleet: WorkerFleet;
      try {
        fleet = await readFleet();
      } catch {
        for (const gauge of Object.values(gauges)) gauge.reset();
        return;
      }
      setFleetGauges(gauges, fleet);
    },
  };
}

type FleetGauges = ReturnType<typeof fleetGauges>;

function fleetGauges(registers: Registry[]) {
  const workers = new Gauge({
    name: 'pidfence_workers',
    help: 'Workers known to the cluster, by state (active, cordoned, draining, drained, revoked).',
    labelNames: ['state'],
    registers,
  });
  const leases = new Gauge({
    name: 'pidfence_worker_leases_held',
    help: "Run-dispatch leases the workers' sessions hold, not released.",
    registers,
  });
  const capacity = new Gauge({
    name: 'pidfence_worker_capacity',
    help: 'Jobs at once announced by the active workers with an open session.',
    registers,
  });
  const sessions = new Gauge({
    name: 'pidfence_worker_sessions_open',
    help: 'Worker sessions not ended (more than one per worker: a restart left one behind, or a shared certificate).',
    registers,
  });
  const heartbeat = new Gauge({
    name: 'pidfence_worker_heartbeat_age_max_seconds',
    help: 'The longest time since a worker with an open session was last heard (database time).',
    registers,
  });
  const unreachable = new Gauge({
    name: 'pidfence_runs_unreachable',
    help: 'Runs whose worker stopped renewing their lease: not ended, not known to run (docs/decisions/0270).',
    registers,
  });
  return { workers, leases, capacity, sessions, heartbeat, unreachable };
}

/** Every bounded reason at 0, so a series exists before its first refusal. */
function fleetRefusals(registers: Registry[]): Counter {
  const refusals = new Counter({
    name: 'pidfence_worker_refusals_total',
    help: 'Worker requests refused (revoked name or certificate) or pulls held back (cordoned, draining), by reason.',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of FLEET_REFUSALS) refusals.inc({ reason }, 0);
  return refusals;
}

function setFleetGauges(gauges: FleetGauges, fleet: WorkerFleet): void {
  const open = fleet.workers.filter((worker) => worker.sessions > 0);
  for (const state of WORKER_STATES)
    gauges.workers.set({ state }, fleet.workers.filter((worker) => worker.state === state).length);
  gauges.leases.set(fleet.workers.reduce((sum, worker) => sum + worker.leasesHeld, 0));
  gauges.unreachable.set(fleet.workers.reduce((sum, worker) => sum + worker.runsUnreachable, 0));
  gauges.capacity.set(
    open.filter((worker) => worker.state === 'active').reduce((sum, worker) => sum + (worker.capacity ?? 0), 0),
  );
  gauges.sessions.set(open.reduce((sum, worker) => sum + worker.sessions, 0));
  gauges.heartbeat.set(Math.max(0, ...open.map((worker) => worker.lastHeartbeatAgeMs ?? 0)) / 1_000);
}

/** One worker session as one replica last saw it (docs/decisions/0204): a random session id, never a name. */
export interface SessionSampleSource {
  samples(): ReadonlyArray<{ readonly session: string; readonly leases: number; readonly tickAgeSeconds: number }>;
}

/** Per worker session: the leases its last page named and the time since that page, set at scrape. */
export function registerSessionMetrics(registry: Registry, source: SessionSampleSource): void {
  const registers = [registry];
  // The leases gauge is registered (and so collected) first: its collect sets both from one snapshot.
  const age = new Gauge({
    name: 'pidfence_worker_session_tick_age_seconds',
    help: "Time since a worker session's last lease page on this replica.",
    labelNames: ['session'],
    registers: [],
  });
  new Gauge({
    name: 'pidfence_worker_session_leases',
    help: 'Leases a worker session named in its last lease page on this replica.',
    labelNames: ['session'],
    registers,
    collect() {
      this.reset();
      age.reset();
      for (const sample of source.samples()) {
        this.set({ session: sample.session }, sample.leases);
        age.set({ session: sample.session }, sample.tickAgeSeconds);
      }
    },
  });
  registry.registerMetric(age);
}
