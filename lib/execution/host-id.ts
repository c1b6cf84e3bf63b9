// The host id of a runner (docs/decisions/0070): stable per machine, so that a runner adopts only
// attempts of its own host. The machine id is never stored as it is (systemd treats it as
// confidential): an app-specific HMAC of it is. PIDFENCE_HOST_ID overrides it, e.g. for containers
// that share one image's machine id. A machine without a machine id (many container images) gets
// a random id created once in the user's state directory and read back from then on.
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import * as path from 'node:path';

import type { Environment } from '../base/environment';
import { PidfenceError } from '../base/errors';
import { HOST_ID_PATTERN, validateHostId } from '../contract/index';

export const HOST_ID_ENV = 'PIDFENCE_HOST_ID';
export const MACHINE_ID_FILES: readonly string[] = ['/etc/machine-id', '/var/lib/dbus/machine-id'];
const MACHINE_ID = /^[0-9a-f]{32}$/;
const HOST_ID_DOMAIN = 'pidfence.host-id.v1';

function machineId(files: readonly string[]): string | null {
  for (const file of files) {
    try {
      const text = readFileSync(file, 'utf8').trim();
      if (MACHINE_ID.test(text)) return text;
    } catch {
      // the next candidate
    }
  }
  return null;
}

function stateHostIdFile(env: Environment): string {
  const stateHome =
    env.XDG_STATE_HOME !== undefined && env.XDG_STATE_HOME !== ''
      ? env.XDG_STATE_HOME
      : path.join(homedir(), '.local', 'state');
  return path.join(path.resolve(stateHome), 'pidfence', 'host-id');
}

/** The id this user's state directory holds, created on first use (O_EXCL: two first runs agree). */
function persistedHostId(env: Environment): string | null {
  const file = stateHostIdFile(env);
  const read = (): string | null => {
    try {
      const text = readFileSync(file, 'utf8').trim();
      return HOST_ID_PATTERN.test(text) ? text : null;
    } catch {
      return null;
    }
  };
  const existing = read();
  if (existing !== null) return existing;
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, `h-${randomBytes(16).toString('hex')}\n`, { flag: 'wx', mode: 0o600 });
  } catch {
    // another runner created it first, or the directory is not writable: read what is there
  }
  return read();
}

export function resolveHostId(
  env: Environment = process.env,
  machineIdFiles: readonly string[] = MACHINE_ID_FILES,
): string {
  const override = env[HOST_ID_ENV];
  if (override !== undefined && override !== '') return validateHostId(override);
  const id = machineId(machineIdFiles);
  if (id !== null) return `h-${createHmac('sha256', id).update(HOST_ID_DOMAIN).digest('hex').slice(0, 32)}`;
  const persisted = persistedHostId(env);
  if (persisted !== null) return persisted;
  throw new PidfenceError(
    `this machine has no machine id and ${stateHostIdFile(env)} cannot be written; set ${HOST_ID_ENV} to a stable name for this host.`,
    'ERR_PIDFENCE_HOST_ID_UNAVAILABLE',
  );
}
