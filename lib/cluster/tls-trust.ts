// The trust a TLS server holds and reloads without a restart (docs/decisions/0242): certificate, key,
// CA and CRL. A reload replaces the context of new handshakes (TLS checks each against the CRL); a
// connection made before it is closed after its next request, and on every request the peer
// certificate's serial is checked against the loaded CRLs, so a revoked certificate is refused at
// once even on a connection it opened earlier. Idle connections are not cut at the reload: a client
// reusing one at that moment would see a reset instead of an answer.
import { createSecureContext, type SecureContextOptions, type Server as TlsServer, type TLSSocket } from 'node:tls';

import { PidfenceError } from '../base/errors';
import { normalSerial, revokedSerials } from './crl';

/** PEM material; `crl` is one or more revocation lists of the CA. */
export interface TrustMaterial {
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
  readonly ca: string | Buffer;
  readonly crl?: string | Buffer;
}

/** What a request's connection is, against the trust in force now. */
export type PeerTrust = 'current' | 'older' | 'revoked';

interface SocketStamp {
  readonly generation: number;
  readonly serial: string | null;
}

/** The context options every reload keeps: TLS 1.3 only (docs/decisions/0102). */
export function contextOptions(material: TrustMaterial): SecureContextOptions {
  return {
    cert: material.cert,
    key: material.key,
    ca: material.ca,
    minVersion: 'TLSv1.3',
    ...(material.crl === undefined ? {} : { crl: material.crl }),
  };
}

/** Proves the material makes a context (key matches certificate, PEM parses) before anything is replaced. */
export function checkTrustMaterial(material: TrustMaterial): ReadonlySet<string> {
  const serials = material.crl === undefined ? new Set<string>() : revokedSerials(material.crl);
  try {
    createSecureContext(contextOptions(material));
  } catch (error) {
    throw new PidfenceError(
      "the certificate, key, CA or CRL cannot be used together (a PEM that does not parse, or a key that is not the certificate's); the trust in force is kept.",
      'ERR_PIDFENCE_CLUSTER_TLS_FILE',
      { cause: error },
    );
  }
  return serials;
}

export class ServerTrust {
  readonly #server: TlsServer;
  #generation = 0;
  #revoked: ReadonlySet<string>;
  readonly #stamps = new WeakMap<TLSSocket, SocketStamp>();

  /** `material` is what the server was started with. */
  constructor(server: TlsServer, material: TrustMaterial) {
    this.#server = server;
    this.#revoked = checkTrustMaterial(material);
    server.on('secureConnection', (socket: TLSSocket) => this.#stamp(socket));
  }

  get generation(): number {
    return this.#generation;
  }

  /** New handshakes get the new context; an older connection is closed after its next request. */
  reload(material: TrustMaterial): void {
    const revoked = checkTrustMaterial(material);
    this.#server.setSecureContext(contextOptions(material));
    this.#revoked = revoked;
    this.#generation++;
  }

  /** One Set lookup per request after the connection's first. */
  check(socket: TLSSocket): PeerTrust {
    const stamp = this.#stamps.get(socket) ?? this.#stamp(socket);
    if (stamp.serial !== null && this.#revoked.has(stamp.serial)) return 'revoked';
    return stamp.generation < this.#generation ? 'older' : 'current';
  }

  #stamp(socket: TLSSocket): SocketStamp {
    const certificate = socket.getPeerX509Certificate?.();
    const stamp = {
      generation: this.#generation,
      serial: certificate === undefined ? null : normalSerial(certificate.serialNumber),
    };
    this.#stamps.set(socket, stamp);
    return stamp;
  }
}
