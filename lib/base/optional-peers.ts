// The optional peer dependencies (docs/decisions/0080, 0223): `pg`, `fastify` and `prom-client` are
// installed by the consumer who needs them, so an edge install carries no database driver, HTTP
// framework or metrics library. What needs one checks for it first and says, in one sentence, what
// to install, before a bare "Cannot find module" could surface.
import type { ErrorCode } from './error-registry';
import { PidfenceError } from './errors';

const MISSING: Readonly<Record<OptionalPeer, ErrorCode>> = {
  pg: 'ERR_PIDFENCE_PG_MISSING',
  fastify: 'ERR_PIDFENCE_FASTIFY_MISSING',
  'prom-client': 'ERR_PIDFENCE_PROM_CLIENT_MISSING',
};

export type OptionalPeer = 'pg' | 'fastify' | 'prom-client';

/** Throws the peer's own code unless it resolves from pidfence's place in node_modules. `needer` names who needs it. */
export function assertPeerInstalled(peer: OptionalPeer, needer: string): void {
  try {
    require.resolve(peer);
  } catch {
    throw new PidfenceError(
      `${needer} needs the '${peer}' package, an optional peer dependency: install it next to pidfence with \`npm install ${peer}\`.`,
      MISSING[peer],
    );
  }
}

/** The peer's module, once it is known to be there. */
export function requirePeer<T>(peer: OptionalPeer, needer: string): T {
  assertPeerInstalled(peer, needer);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, by name
  return require(peer) as T;
}
