// The host id of a runner (docs/decisions/0070): stable per machine, so that a runner adopts only
// attempts of its own host. The machine id is never stored as it is (systemd treats it as
// confidential): an app-specific HMAC of it is. PIDFENCE_HOST_ID overrides it, e.g. for containers
// that share one image's machine id.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { PidfenceError } from '../base/errors';
import { validateHostId } from '../store/runner-store';

export const HOST_ID_ENV = 'PIDFENCE_HOST_ID';
const MACHINE_ID_FILES = ['/etc/machine-id', '/var/lib/dbus/machine-id'] as const;
const MACHINE_ID = /^[0-9a-f]{32}$/;
const HOST_ID_DOMAIN = 'pidfence.host-id.v1';

function machineId(): string | null {
  for (const file of MACHINE_ID_FILES) {
    try {
      const text = readFileSync(file, 'utf8').trim();
      if (MACHINE_ID.test(text)) return text;
    } catch {
      // the next candidate
    }
  }
  return null;
}

export function resolveHostId(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[HOST_ID_ENV];
  if (override !== undefined && override !== '') return validateHostId(override);
  const id = machineId();
  if (id === null) {
    throw new PidfenceError(`this machine has no /etc/machine-id; set ${HOST_ID_ENV} to a stable name for this host.`, 'ERR_PIDFENCE_HOST_ID_UNAVAILABLE');
  }
  return `h-${createHmac('sha256', id).update(HOST_ID_DOMAIN).digest('hex').slice(0, 32)}`;
}
