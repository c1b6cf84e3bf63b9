// The operator's view of the worker fleet (docs/decisions/0240, 0241, 0245): worker names, states,
// the acts an operator may take on a worker and what each does to its state. Pure: no I/O.
import { PidfenceRangeError, PidfenceTypeError } from '../base/errors';
import { OWNER_MAX_LENGTH } from './limits';
import { validateExactShape } from './validators';

/** The scope of the worker permissions in the grants table: no project id can spell it (docs/decisions/0244). */
export const CLUSTER_SCOPE = '@cluster';

/** Whether new work may reach a worker: everything, nothing new, or nothing new and its runs asked to stop. */
export const WORKER_ADMISSIONS = ['active', 'cordoned', 'draining'] as const;
export type WorkerAdmission = (typeof WORKER_ADMISSIONS)[number];

/** What `pidfence workers` says of one: its admission, `drained` once a draining worker holds nothing, or `revoked`. */
export const WORKER_STATES = ['active', 'cordoned', 'draining', 'drained', 'revoked'] as const;
export type WorkerState = (typeof WORKER_STATES)[number];

/** `forget` declares the worker's host gone: its runs end `forgotten` (docs/decisions/0271); its hold is unchanged. */
export const WORKER_ACTIONS = ['cordon', 'drain', 'uncordon', 'revoke', 'reinstate', 'forget'] as const;
export type WorkerAction = (typeof WORKER_ACTIONS)[number];

/** Why the control plane refused a worker's request or held its pull back; a bounded metrics label, never a name. */
export const FLEET_REFUSALS = ['revoked', 'certificate_revoked', 'cordoned'] as const;
export type FleetRefusal = (typeof FLEET_REFUSALS)[number];

/** The most workers one list holds; a larger fleet is listed in part and says so. */
export const WORKER_LIST_MAX = 1_000;
export const WORKER_CAPACITY_MAX = 1_024;
export const WORKER_VERSION_MAX_LENGTH = 64;

export const WORKER_NAME_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,${OWNER_MAX_LENGTH - 1}}$`);
const VERSION = new RegExp(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,${WORKER_VERSION_MAX_LENGTH - 1}}$`);

/** One worker as the operator sees it. Never a PID, command, session id, lease or run id. */
export interface WorkerView {
  /** The subject CN of its certificate: the only name a worker has. */
  readonly name: string;
  /** The pidfence version it announced; null until it did. */
  readonly version: string | null;
  readonly state: WorkerState;
  /** Its sessions not ended (more than one: a restart left one behind, or two hosts share the certificate). */
  readonly sessions: number;
  /** Database time since any of its sessions was last heard; null when it never registered one. */
  readonly lastHeartbeatAgeMs: number | null;
  /** Run-dispatch leases its sessions hold, not released. */
  readonly leasesHeld: number;
  /** Of those, runs marked `unreachable`: it stopped renewing them (docs/decisions/0270). */
  readonly runsUnreachable: number;
  /** The jobs at once it announced; null until it did. */
  readonly capacity: number | null;
  readonly revokedAtMs: number | null;
}

export interface WorkerFleet {
  /** The database time of the read. */
  readonly asOfMs: number;
  /** By name. */
  readonly workers: readonly WorkerView[];
  /** More than WORKER_LIST_MAX workers are known; the rest are left out. */
  readonly truncated: boolean;
}

/** A worker's stored hold: admission and revocation. */
export interface WorkerHold {
  readonly admission: WorkerAdmission;
  readonly revoked: boolean;
}

export interface WorkerActionOutcome {
  readonly name: string;
  readonly action: WorkerAction;
  /** `unchanged`: the worker was already so; the act is still audited. */
  readonly outcome: 'changed' | 'unchanged';
  readonly state: WorkerState;
  /** The worker row's revision after the act: it grows with every change. */
  readonly revision: number;
  /** drain only: runs of this worker whose stop was asked for now (an earlier ask is kept, not counted). */
  readonly stopsRequested?: number;
  /** forget only: runs that ended `failed` with cause `forgotten`, and sessions ended (docs/decisions/0271). */
  readonly runsForgotten?: number;
  readonly sessionsEnded?: number;
}

/**
 * What an act makes of a hold. Cordon and drain only ever narrow admission (a cordon never undoes a
 * drain); only uncordon widens it. So two operators' acts give the same end in either order.
 */
export function heldAfter(hold: WorkerHold, action: WorkerAction): WorkerHold {
  switch (action) {
    case 'cordon':
      return hold.admission === 'active' ? { ...hold, admission: 'cordoned' } : hold;
    case 'drain':
      return { ...hold, admission: 'draining' };
    case 'uncordon':
      return { ...hold, admission: 'active' };
    case 'revoke':
      return { ...hold, revoked: true };
    case 'reinstate':
      return { ...hold, revoked: false };
    case 'forget':
      return hold;
  }
}

export function workerStateOf(hold: WorkerHold, leasesHeld: number): WorkerState {
  if (hold.revoked) return 'revoked';
  if (hold.admission === 'draining' && leasesHeld === 0) return 'drained';
  return hold.admission;
}

export function validateWorkerName(value: unknown): string {
  if (typeof value !== 'string')
    throw new PidfenceTypeError(
      'a worker name must be a string: the subject CN of its certificate.',
      'ERR_PIDFENCE_INVALID_WORKER_NAME',
    );
  if (!WORKER_NAME_PATTERN.test(value)) {
    throw new PidfenceRangeError(
      `a worker name is the subject CN of its certificate: 1 to ${OWNER_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : @ / - starting with a letter or digit.`,
      'ERR_PIDFENCE_INVALID_WORKER_NAME',
    );
  }
  return value;
}

export function validateWorkerAction(value: unknown): WorkerAction {
  if (typeof value !== 'string' || !(WORKER_ACTIONS as readonly string[]).includes(value)) {
    throw new PidfenceRangeError(
      `a worker act is one of ${WORKER_ACTIONS.join(', ')}.`,
      'ERR_PIDFENCE_INVALID_WORKER_ACTION',
    );
  }
  return value as WorkerAction;
}

/** What a worker announces of itself: its pidfence version and the jobs it runs at once. */
export interface WorkerAnnouncement {
  readonly version: string;
  readonly capacity: number;
}

export function validateWorkerAnnouncement(value: unknown): WorkerAnnouncement {
  const input = validateExactShape(value, 'worker announcement', ['version', 'capacity']);
  if (typeof input.version !== 'string' || !VERSION.test(input.version)) {
    throw new PidfenceRangeError(
      `version must be 1 to ${WORKER_VERSION_MAX_LENGTH} characters of 0-9 A-Z a-z . + _ -.`,
      'ERR_PIDFENCE_INVALID_WORKER_ANNOUNCEMENT',
    );
  }
  const { capacity } = input;
  if (typeof capacity !== 'number' || !Number.isInteger(capacity) || capacity < 1 || capacity > WORKER_CAPACITY_MAX) {
    throw new PidfenceRangeError(
      `capacity must be an integer from 1 to ${WORKER_CAPACITY_MAX}.`,
      'ERR_PIDFENCE_INVALID_WORKER_ANNOUNCEMENT',
    );
  }
  return { version: input.version, capacity };
}
