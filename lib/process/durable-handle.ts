// DurableProcessHandle: the low-sensitivity text stored with an Attempt that names exactly one
// process of one boot (design/dispatch §2.3). No command line, no environment: identity only. v2
// adds the PID namespace the PID belongs to and, for a contained job, its cgroup's id
// (docs/decisions/0155, 0180); v1 handles still parse and mean what they meant.
import { PidfenceRangeError, PidfenceTypeError, isPidfenceInputError } from '../base/errors';
import { CGROUP_SUBTREE_HANDLE_MAX_BYTES, CGROUP_SUBTREE_HANDLE_PATTERN, HANDLE_MAX_BYTES } from '../base/limits';
import { shapeProblem } from '../base/shape';
import {
  validateBootId,
  validatePid,
  validatePidfsIno,
  validateCgroupId,
  validatePidNamespace,
  validateStartTicks,
} from '../native/validate';
import type { ProcessIdentity } from '../native/index';
import { ownPidNamespace } from './pid-namespace';

/** The version this pidfence writes; it reads HANDLE_VERSIONS. */
export const HANDLE_VERSION = 2;
export const HANDLE_VERSIONS = [1, 2] as const;
export const HANDLE_PLATFORM = 'linux';
/** A canonical handle is under 220 bytes; anything much larger is not one. */
export { HANDLE_MAX_BYTES };

export interface DurableProcessHandle {
  readonly v: (typeof HANDLE_VERSIONS)[number];
  readonly platform: typeof HANDLE_PLATFORM;
  readonly bootId: string;
  readonly pid: number;
  readonly startTicks: string;
  /** Always equal to pid: only a process-group leader gets a handle. */
  readonly pgid: number;
  /** Present when captured on a pidfs kernel (6.9+), and then always compared. */
  readonly pidfsIno?: string;
  /** v2: the inode of the PID namespace `pid` was read in (the capturing process's own). */
  readonly pidNs?: string;
  /** v2, contained jobs: the id (directory inode) of the attempt's own cgroup. */
  readonly cgroupId?: string;
  /** v2, with cgroupId: the subtree that cgroup was made in, where every stop looks (docs/decisions/0304). */
  readonly cgroupSubtree?: string;
}

const REQUIRED_KEYS = ['v', 'platform', 'bootId', 'pid', 'startTicks', 'pgid'] as const;
const KEYS_BY_VERSION = {
  1: { required: REQUIRED_KEYS, optional: ['pidfsIno'] },
  2: { required: [...REQUIRED_KEYS, 'pidNs'], optional: ['pidfsIno', 'cgroupId', 'cgroupSubtree'] },
} as const;

/**
 * A cgroup subtree a handle can carry (docs/decisions/0304): an absolute path of printable ASCII
 * without `"` or `\`, at most CGROUP_SUBTREE_HANDLE_MAX_BYTES. Throws ERR_PIDFENCE_INVALID_CGROUP.
 */
export function validateHandleCgroupSubtree(value: unknown): string {
  if (
    typeof value !== 'string' ||
    value.length > CGROUP_SUBTREE_HANDLE_MAX_BYTES ||
    !CGROUP_SUBTREE_HANDLE_PATTERN.test(value)
  ) {
    throw new PidfenceRangeError(
      `a job cgroup's subtree must be an absolute path of at most ${CGROUP_SUBTREE_HANDLE_MAX_BYTES} printable ASCII characters without " or \\ (the job's handle names it); use a shorter or plainer directory.`,
      'ERR_PIDFENCE_INVALID_CGROUP',
    );
  }
  return value;
}

function handleError(kind: 'type' | 'range', message: string, code: string): Error {
  const text = `durable handle rejected: ${message}`;
  return kind === 'type' ? new PidfenceTypeError(text, code) : new PidfenceRangeError(text, code);
}

/** Fixed key order: the text form is canonical, so formatHandle(parseHandle(x)) === x. */
export function formatHandle(handle: DurableProcessHandle): string {
  const ordered: Record<string, unknown> = {
    v: handle.v,
    platform: handle.platform,
    bootId: handle.bootId,
    pid: handle.pid,
    startTicks: handle.startTicks,
    pgid: handle.pgid,
  };
  if (handle.pidfsIno !== undefined) ordered.pidfsIno = handle.pidfsIno;
  if (handle.v !== 1) {
    ordered.pidNs = handle.pidNs;
    if (handle.cgroupId !== undefined) ordered.cgroupId = handle.cgroupId;
    if (handle.cgroupSubtree !== undefined) ordered.cgroupSubtree = handle.cgroupSubtree;
  }
  return JSON.stringify(ordered);
}

/** A handle platform name: what routes a stored handle to its controller. */
export const PLATFORM_PATTERN = /^[a-z][a-z0-9-]{0,31}$/;

/**
 * The `platform` field of a stored handle of any platform, read by the same parse that parseHandle
 * starts with, without trusting the rest (its controller parses the whole handle). null when the
 * text is not a handle-shaped JSON object with a valid platform.
 */
export function handlePlatform(text: string): string | null {
  if (typeof text !== 'string' || Buffer.byteLength(text) > HANDLE_MAX_BYTES) return null;
  let record: Record<string, unknown>;
  try {
    record = parseJsonObject(text);
  } catch {
    return null;
  }
  const platform = record.platform;
  return typeof platform === 'string' && PLATFORM_PATTERN.test(platform) ? platform : null;
}

function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw handleError(
      'type',
      'not JSON; store exactly the text formatHandle() produced.',
      'ERR_PIDFENCE_HANDLE_SYNTAX',
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw handleError(
      'type',
      'not a JSON object; store exactly the text formatHandle() produced.',
      'ERR_PIDFENCE_HANDLE_SYNTAX',
    );
  }
  return value as Record<string, unknown>;
}

function checkVersion(record: Record<string, unknown>): DurableProcessHandle['v'] {
  if (record.v !== 1 && record.v !== 2) {
    throw handleError(
      'range',
      `unknown version; this pidfence reads v${HANDLE_VERSIONS.join(' and v')}.`,
      'ERR_PIDFENCE_HANDLE_VERSION',
    );
  }
  return record.v;
}

function checkKeys(record: Record<string, unknown>, version: DurableProcessHandle['v']): void {
  const { required, optional } = KEYS_BY_VERSION[version];
  const problem = shapeProblem(record, required, optional);
  if (problem?.kind === 'unknown_key') {
    throw handleError(
      'type',
      `unknown key (${problem.key.length} characters); a v${version} handle has only ${[...required, ...optional].join(', ')}.`,
      'ERR_PIDFENCE_HANDLE_UNKNOWN_KEY',
    );
  }
  if (problem?.kind === 'missing_key')
    throw handleError('type', `missing key "${problem.key}".`, 'ERR_PIDFENCE_HANDLE_MISSING_KEY');
}

// Field validators come from lib/native so a handle accepts exactly what the kernel layer does;
// their errors are re-coded so callers see one handle error family.
function field<T>(name: string, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (!isPidfenceInputError(error)) throw error;
    throw handleError(
      error instanceof TypeError ? 'type' : 'range',
      `field "${name}": ${error.message}`,
      'ERR_PIDFENCE_HANDLE_FIELD',
    );
  }
}

/** Parses a stored handle, exact shape only. Throws a typed error with a stable code. */
export function parseHandle(text: unknown): DurableProcessHandle {
  if (typeof text !== 'string') throw handleError('type', 'a handle is a string.', 'ERR_PIDFENCE_HANDLE_TYPE');
  if (Buffer.byteLength(text, 'utf8') > HANDLE_MAX_BYTES) {
    throw handleError('range', `larger than ${HANDLE_MAX_BYTES} bytes.`, 'ERR_PIDFENCE_HANDLE_TOO_LARGE');
  }
  const record = parseJsonObject(text);
  const version = checkVersion(record);
  checkKeys(record, version);
  if (record.platform !== HANDLE_PLATFORM) {
    throw handleError(
      'range',
      `unknown platform; this pidfence reads "${HANDLE_PLATFORM}" handles.`,
      'ERR_PIDFENCE_HANDLE_PLATFORM',
    );
  }
  const pid = field('pid', () => validatePid(record.pid));
  const pgid = field('pgid', () => validatePid(record.pgid, 'pgid'));
  if (pgid !== pid) {
    throw handleError(
      'range',
      'pgid differs from pid: only a process-group leader can hold a handle.',
      'ERR_PIDFENCE_HANDLE_PGID',
    );
  }
  const handle: DurableProcessHandle = {
    v: version,
    platform: HANDLE_PLATFORM,
    bootId: field('bootId', () => validateBootId(record.bootId)),
    pid,
    startTicks: field('startTicks', () => validateStartTicks(record.startTicks)),
    pgid,
    ...(record.pidfsIno === undefined ? {} : { pidfsIno: field('pidfsIno', () => validatePidfsIno(record.pidfsIno)) }),
    ...(record.pidNs === undefined ? {} : { pidNs: field('pidNs', () => validatePidNamespace(record.pidNs)) }),
    ...(record.cgroupId === undefined ? {} : { cgroupId: field('cgroupId', () => validateCgroupId(record.cgroupId)) }),
    ...(record.cgroupSubtree === undefined
      ? {}
      : { cgroupSubtree: field('cgroupSubtree', () => validateHandleCgroupSubtree(record.cgroupSubtree)) }),
  };
  if (handle.cgroupSubtree !== undefined && handle.cgroupId === undefined) {
    throw handleError('range', 'cgroupSubtree without cgroupId names no cgroup.', 'ERR_PIDFENCE_HANDLE_FIELD');
  }
  if (formatHandle(handle) !== text) {
    // Same facts, other spelling (spaces, key order, duplicate keys): refuse, so a stored handle
    // has exactly one form and compares byte for byte.
    throw handleError(
      'range',
      'not in canonical form; store exactly the text formatHandle() produced.',
      'ERR_PIDFENCE_HANDLE_NOT_CANONICAL',
    );
  }
  return handle;
}

/** Where a captured identity lives beyond its PID: its PID namespace and, when contained, its cgroup. */
export interface HandlePlace {
  /** Default: this process's own PID namespace (the one the PID was read in). */
  readonly pidNs?: string;
  readonly cgroupId?: string;
  /** Given with cgroupId: the subtree that cgroup is in. */
  readonly cgroupSubtree?: string;
}

function cgroupPlaceOf(place: HandlePlace): { cgroupId?: string; cgroupSubtree?: string } {
  if (place.cgroupId === undefined) return {};
  return {
    cgroupId: place.cgroupId,
    ...(place.cgroupSubtree === undefined ? {} : { cgroupSubtree: place.cgroupSubtree }),
  };
}

/**
 * The handle for a captured identity; the process must lead its own group. A v2 handle where this
 * process's PID namespace can be read, else v1 (then nothing could check the namespace anyway).
 */
export function handleFromIdentity(identity: ProcessIdentity, place: HandlePlace = {}): DurableProcessHandle {
  if (identity.pgid !== identity.pid) {
    throw handleError(
      'range',
      'the process does not lead its own group; spawn it with spawnGroupLeader().',
      'ERR_PIDFENCE_HANDLE_PGID',
    );
  }
  const pidNs = place.pidNs ?? ownPidNamespace();
  return {
    v: pidNs === null ? 1 : HANDLE_VERSION,
    platform: HANDLE_PLATFORM,
    bootId: identity.bootId,
    pid: identity.pid,
    startTicks: identity.startTicks,
    pgid: identity.pgid,
    ...(identity.pidfsIno === undefined ? {} : { pidfsIno: identity.pidfsIno }),
    ...(pidNs === null ? {} : { pidNs, ...cgroupPlaceOf(place) }),
  };
}

/** The identity a handle asks the kernel layer to prove. */
export function handleExpectedIdentity(handle: DurableProcessHandle): {
  pid: number;
  bootId: string;
  startTicks: string;
  pidfsIno?: string;
} {
  return Object.freeze({
    pid: handle.pid,
    bootId: handle.bootId,
    startTicks: handle.startTicks,
    ...(handle.pidfsIno === undefined ? {} : { pidfsIno: handle.pidfsIno }),
  });
}
