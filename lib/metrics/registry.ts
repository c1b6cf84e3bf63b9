// The Prometheus metrics of one pidfence process (docs/decisions/0110, 0112) on prom-client: the
// counters and histograms the dispatch and execution layers feed through their observer, and
// per-project gauges read from the store at scrape time for an operator's project allowlist. This
// module is the only one that loads prom-client, and nothing loads it unless metrics were asked for.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

import { PidfenceRangeError } from '../base/errors';
import { BLOCKING_RESULTS, DISPATCH_RESULTS, DISPATCH_STATUSES, validateId, type StateCounts } from '../contract/index';
import { CLAIM_KINDS, STOP_MODES, type DispatchObserver, type VerifiedSignal } from '../dispatch/index';
import type { WorkerFleet } from '../contract/index';
import { registerFleetMetrics, registerSessionMetrics, type FleetMetrics, type SessionSampleSource } from './fleet';

/** More projects than this is not an allowlist; each costs one summary statement per scrape. */
export const METRICS_PROJECTS_MAX = 64;

/** What a project's gauges are read from: the summary of design/dispatch §5.2 and the running count. */
export interface ProjectGauges {
  readonly states: StateCounts;
  readonly overdue: number;
  readonly running: number;
}

export interface MetricsOptions {
  /** The projects whose gauges are exported (the allowlist, may be empty); labels never name any other. */
  readonly projects: readonly string[];
  /** Reads one project's counts (one statement); called for every allowlisted project at each scrape. */
  readonly readProject: (projectId: string) => Promise<ProjectGauges>;
  /** The overdue bound of the summary, exported so alerts can say it. */
  readonly overdueAfterMs: number;
  /** A control plane's fleet read (docs/decisions/0245): given, the fleet gauges are exported too. */
  readonly readFleet?: () => Promise<WorkerFleet>;
}

export interface Metrics {
  /** Feed it to createExecution, the Dispatcher, the Supervisor or the control plane's stop wrapper. */
  readonly observer: DispatchObserver;
  /** `text/plain; version=0.0.4; charset=utf-8` */
  readonly contentType: string;
  /** The exposition text, with the project gauges read now (concurrent scrapes share one read). */
  exposition(): Promise<string>;
  /** Given `readFleet`: counts the control plane's fleet refusals by reason. */
  readonly fleetObserver?: FleetMetrics['observer'];
  /** A control plane's worker sessions (docs/decisions/0204): lease count and tick age per session. */
  registerSessions(source: SessionSampleSource): void;
}

/** Buckets in seconds: two store transactions (ms), a stop that waits out a grace period (s), one native call (µs). */
const CLAIM_SETTLE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const CANCEL_TO_EXIT_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const SIGNAL_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01];

export function validateMetricsProjects(projects: unknown): readonly string[] {
  if (!Array.isArray(projects) || projects.length > METRICS_PROJECTS_MAX) {
    throw new PidfenceRangeError(
      `the metrics project allowlist holds at most ${METRICS_PROJECTS_MAX} project ids; name only the projects whose gauges to export.`,
      'ERR_PIDFENCE_INVALID_METRICS_PROJECTS',
    );
  }
  return [...new Set(projects.map((project) => validateId(project, 'metrics project')))];
}

/** The dispatch counters and histograms, each bounded label value at 0 so a series exists before its first event. */
function dispatchInstruments(registers: Registry[]) {
  return { ...dispatchCounters(registers), ...dispatchHistograms(registers) };
}

function dispatchCounters(registers: Registry[]) {
  const results = new Counter({
    name: 'pidfence_dispatch_results_total',
    help: 'Dispatch results recorded, by result (design/dispatch §2.4).',
    labelNames: ['result'],
    registers,
  });
  const claims = new Counter({
    name: 'pidfence_dispatch_claims_total',
    help: 'Dispatch claims answered, by outcome.',
    labelNames: ['outcome'],
    registers,
  });
  const staleFences = new Counter({
    name: 'pidfence_dispatch_stale_fences_total',
    help: 'Results refused because a newer owner held the lease.',
    registers,
  });
  const cycles = new Counter({
    name: 'pidfence_supervisor_cycles_total',
    help: 'Supervisor cycles ended, failed ones included.',
    registers,
  });
  const cycleFailures = new Counter({
    name: 'pidfence_supervisor_cycle_failures_total',
    help: 'Supervisor cycles that failed (store error or a page that broke the contract).',
    registers,
  });
  const stops = new Counter({
    name: 'pidfence_stops_total',
    help: 'Stops whose TERM went out after its proof, by group-signal mode.',
    labelNames: ['mode'],
    registers,
  });
  const refusals = new Counter({
    name: 'pidfence_stop_refusals_total',
    help: 'Stops the controller refused before any signal, by reason.',
    labelNames: ['reason'],
    registers,
  });
  // rate() works from the first scrape.
  for (const result of DISPATCH_RESULTS) results.inc({ result }, 0);
  for (const outcome of CLAIM_KINDS) claims.inc({ outcome }, 0);
  for (const mode of STOP_MODES) stops.inc({ mode }, 0);
  for (const reason of BLOCKING_RESULTS) refusals.inc({ reason }, 0);
  return { results, claims, staleFences, cycles, cycleFailures, stops, refusals };
}

function dispatchHistograms(registers: Registry[]) {
  const claimSettle = new Histogram({
    name: 'pidfence_dispatch_claim_settle_seconds',
    help: 'The claim and the result transaction of one dispatch together.',
    buckets: CLAIM_SETTLE_BUCKETS,
    registers,
  });
  const cancelToExit = new Histogram({
    name: 'pidfence_cancel_to_exit_seconds',
    help: 'From the recorded cancel intent to the job seen ended.',
    buckets: CANCEL_TO_EXIT_BUCKETS,
    registers,
  });
  const signalLatency = new Histogram({
    name: 'pidfence_verified_signal_seconds',
    help: 'One identity proof and its signal (TERM, CONT or KILL).',
    buckets: SIGNAL_BUCKETS,
    registers,
  });
  return { claimSettle, cancelToExit, signalLatency };
}

const known = <T extends string>(values: readonly T[], value: string): value is T =>
  (values as readonly string[]).includes(value);

/** The dispatch observer that feeds the instruments; values outside the bounded label sets are dropped. */
function dispatchObserverOf(instruments: ReturnType<typeof dispatchInstruments>): DispatchObserver {
  const {
    results,
    claims,
    staleFences,
    cycles,
    cycleFailures,
    stops,
    refusals,
    claimSettle,
    cancelToExit,
    signalLatency,
  } = instruments;
  return {
    onClaim: (outcome) => {
      if (known(CLAIM_KINDS, outcome)) claims.inc({ outcome });
    },
    onControllerAnswer: (result) => {
      if (known(BLOCKING_RESULTS, result)) refusals.inc({ reason: result });
    },
    onSettled: (result, seconds) => {
      if (!known(DISPATCH_RESULTS, result)) return;
      results.inc({ result });
      claimSettle.observe(seconds);
    },
    onStaleFence: () => staleFences.inc(),
    onCycle: (failed) => {
      cycles.inc();
      if (failed) cycleFailures.inc();
    },
    onSignal: (signal: VerifiedSignal) => {
      signalLatency.observe(signal.seconds);
      if (signal.signal === 'SIGTERM' && known(STOP_MODES, signal.mode)) stops.inc({ mode: signal.mode });
    },
    onCancelToExit: (seconds) => cancelToExit.observe(seconds),
  };
}

/** The per-project gauges, read from the store at each scrape: returns the reader. */
function projectGauges(
  registers: Registry[],
  projects: readonly string[],
  options: MetricsOptions,
): () => Promise<void> {
  const dispatches = new Gauge({
    name: 'pidfence_dispatches',
    help: 'Dispatch records of an allowlisted project, by state.',
    labelNames: ['project', 'state'],
    registers,
  });
  const overdue = new Gauge({
    name: 'pidfence_dispatches_overdue',
    help: 'Due dispatches older than the overdue bound (pidfence status: attention required).',
    labelNames: ['project'],
    registers,
  });
  const running = new Gauge({
    name: 'pidfence_running_jobs',
    help: 'Jobs of an allowlisted project running now.',
    labelNames: ['project'],
    registers,
  });
  const storeUp = new Gauge({
    name: 'pidfence_metrics_store_up',
    help: '1 when the last scrape read every project gauge from the store, else 0 (the gauges are then absent).',
    registers,
  });
  const overdueAfter = new Gauge({
    name: 'pidfence_dispatch_overdue_after_seconds',
    help: 'The overdue bound the summary applies.',
    registers,
  });
  overdueAfter.set(options.overdueAfterMs / 1_000);
  return async () => {
    try {
      // One statement per project, one after another: a scrape never takes more than one connection.
      const read: Array<{ project: string; gauges: ProjectGauges }> = [];
      for (const project of projects) read.push({ project, gauges: await options.readProject(project) });
      dispatches.reset();
      for (const { project, gauges } of read) {
        for (const state of DISPATCH_STATUSES) dispatches.set({ project, state }, gauges.states[state]);
        overdue.set({ project }, gauges.overdue);
        running.set({ project }, gauges.running);
      }
      storeUp.set(1);
    } catch {
      // No number is better than a stale one: the gauges go away and store_up says why.
      dispatches.reset();
      overdue.reset();
      running.reset();
      storeUp.set(0);
    }
  };
}

export function createMetrics(options: MetricsOptions): Metrics {
  const projects = validateMetricsProjects(options.projects);
  const registry = new Registry();
  const registers = [registry];
  const observer = dispatchObserverOf(dispatchInstruments(registers));
  const readGauges = projectGauges(registers, projects, options);
  const fleet = options.readFleet === undefined ? undefined : registerFleetMetrics(registry, options.readFleet);
  let reading: Promise<void> | null = null;
  return {
    observer,
    contentType: registry.contentType,
    ...(fleet === undefined ? {} : { fleetObserver: fleet.observer }),
    registerSessions: (source) => registerSessionMetrics(registry, source),
    async exposition() {
      reading ??= Promise.all([readGauges(), fleet?.refresh()])
        .then(() => undefined)
        .finally(() => {
          reading = null;
        });
      await reading;
      return registry.metrics();
    },
  };
}
