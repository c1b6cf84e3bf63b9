// The CLI as a client of the cluster's control plane (docs/decisions/0243): `--control-plane URL` with
// the operator's client certificate (`--cert`, `--key`, `--ca`, or $PIDFENCE_CERT, $PIDFENCE_KEY,
// $PIDFENCE_CA). The certificate's subject CN is the principal; the control plane checks its grants.
// A refusal comes back with its code, so the exit status is the same as for a local store.
import type { Command } from 'commander';

import { isRegisteredErrorCode } from '../base/error-registry';
import { PidfenceError, PidfenceRangeError } from '../base/errors';
import type { ControlPlaneClient } from '../cluster/client';
import { readPem } from './pem';

export const CONTROL_PLANE_ENV = 'PIDFENCE_CONTROL_PLANE';
const FILE_ENV = { cert: 'PIDFENCE_CERT', key: 'PIDFENCE_KEY', ca: 'PIDFENCE_CA' } as const;

export interface ControlPlaneOptions {
  readonly controlPlane?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly ca?: string;
  readonly crl?: string;
}

export interface ControlPlaneTarget {
  readonly url: string;
  readonly tls: { readonly cert: string; readonly key: string; readonly ca: string; readonly crl?: string };
}

/** `--control-plane`, `--cert`, `--key`, `--ca`, `--crl`: every command that can act on a cluster. */
export function addControlPlaneOptions(command: Command, envNamesTheUrl = false): Command {
  const url = envNamesTheUrl ? ` (default: $${CONTROL_PLANE_ENV})` : '';
  return command
    .option('--control-plane <url>', `https:// URL of a control-plane replica: act on the cluster${url}`)
    .option('--cert <file>', `your client certificate (PEM); its CN is your principal (default: $${FILE_ENV.cert})`)
    .option('--key <file>', `its key (PEM) (default: $${FILE_ENV.key})`)
    .option('--ca <file>', `the CA of the control plane's certificate (PEM) (default: $${FILE_ENV.ca})`)
    .option('--crl <file>', "revocation lists the control plane's certificate is checked against (PEM)");
}

function fileOf(options: ControlPlaneOptions, env: NodeJS.ProcessEnv, which: 'cert' | 'key' | 'ca'): string {
  const file = options[which] ?? env[FILE_ENV[which]];
  if (file === undefined || file === '') {
    throw new PidfenceRangeError(
      `--${which} <file> is required with --control-plane (or set $${FILE_ENV[which]}).`,
      'ERR_PIDFENCE_USAGE',
    );
  }
  return readPem(file, `--${which}`);
}

function targetAt(url: string, options: ControlPlaneOptions, env: NodeJS.ProcessEnv): ControlPlaneTarget {
  if (!/^https:\/\/[^\s/]+/.test(url))
    throw new PidfenceRangeError(
      `--control-plane must be an https:// URL; you gave ${url.slice(0, 64)}.`,
      'ERR_PIDFENCE_USAGE',
    );
  const crl = options.crl === undefined ? {} : { crl: readPem(options.crl, '--crl') };
  return {
    url,
    tls: {
      cert: fileOf(options, env, 'cert'),
      key: fileOf(options, env, 'key'),
      ca: fileOf(options, env, 'ca'),
      ...crl,
    },
  };
}

/**
 * The control plane `run`, `list`, `show` and `cancel` talk to, or null for the local store. Only an
 * explicit --control-plane moves them to a cluster, never an environment variable: a job must not run
 * elsewhere because of the environment.
 */
export function controlPlaneTarget(
  options: ControlPlaneOptions & { readonly db?: string; readonly as?: string },
  env: NodeJS.ProcessEnv,
): ControlPlaneTarget | null {
  if (options.controlPlane === undefined) return null;
  if (options.db !== undefined)
    throw new PidfenceRangeError(
      "--db and --control-plane do not go together: a store is either local or the cluster's.",
      'ERR_PIDFENCE_USAGE',
    );
  if (options.as !== undefined)
    throw new PidfenceRangeError(
      "--as does not go with --control-plane: on a cluster your certificate's subject is your principal.",
      'ERR_PIDFENCE_USAGE',
    );
  return targetAt(options.controlPlane, options, env);
}

/** The control plane of the fleet commands, which have no local store: --control-plane or $PIDFENCE_CONTROL_PLANE. */
export function fleetControlPlane(options: ControlPlaneOptions, env: NodeJS.ProcessEnv): ControlPlaneTarget {
  const url = options.controlPlane ?? env[CONTROL_PLANE_ENV];
  if (url === undefined || url === '')
    throw new PidfenceRangeError(
      `--control-plane <url> is required (or set $${CONTROL_PLANE_ENV}).`,
      'ERR_PIDFENCE_USAGE',
    );
  return targetAt(url, options, env);
}

/** Opens a client (cluster code is loaded only here), runs `use`, closes it. */
export async function withControlPlane<T>(
  target: ControlPlaneTarget,
  use: (client: ControlPlaneClient) => Promise<T>,
): Promise<T> {
  const { ControlPlaneClient } = await import('../cluster/client');
  const client = new ControlPlaneClient(target.url, target.tls);
  try {
    return await use(client);
  } finally {
    client.close();
  }
}

/** One request; a refusal becomes the control plane's own typed error (its sentence, its code). */
export async function askControlPlane<T>(
  client: ControlPlaneClient,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<T> {
  const reply = await client.send<T & { code?: unknown; message?: unknown }>(method, path, body);
  if (reply.status >= 200 && reply.status < 300) return reply.body;
  const code =
    typeof reply.body?.code === 'string' && isRegisteredErrorCode(reply.body.code)
      ? reply.body.code
      : 'ERR_PIDFENCE_CLUSTER_REPLY';
  const message =
    typeof reply.body?.message === 'string'
      ? reply.body.message
      : `the control plane answered ${reply.status} (${typeof reply.body?.code === 'string' ? reply.body.code : 'no code'}); try again, and check the control plane's health.`;
  throw new PidfenceError(message, code);
}
