// A control-plane client over HTTPS with the caller's client certificate (docs/decisions/0102):
// node:https with TLS 1.3 and the cluster CA as the only trust anchor. JSON in, JSON out.
import type { ClientRequest } from 'node:http';
import { request as httpsRequest, Agent } from 'node:https';
import type { Socket } from 'node:net';

import { PidfenceError } from '../base/errors';
import { checkTrustMaterial } from './tls-trust';

export interface ClientTls {
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
  /** The CA that signed the control plane's server certificate. */
  readonly ca: string | Buffer;
  /** PEM revocation lists the control plane's certificate is checked against (docs/decisions/0242). */
  readonly crl?: string | Buffer;
}

export interface ClientReply<T> {
  readonly status: number;
  readonly body: T;
}

const REQUEST_TIMEOUT_MS = 10_000;
/**
 * The worker's replica set asks a new connection to a replica it deems healthy to finish its TLS
 * handshake this soon (docs/decisions/0396): a replica that accepts and never answers is given up
 * after this, not after the request's whole timeout. Other callers are not bounded by it.
 */
export const HANDSHAKE_TIMEOUT_MS = 2_000;

export class ControlPlaneClient {
  readonly #base: URL;
  #agent: Agent;

  constructor(url: string, tls: ClientTls) {
    this.#base = new URL(url);
    this.#agent = agentFor(tls);
  }

  /**
   * New certificate, key, CA or CRL without a restart (docs/decisions/0242): the next request makes a
   * new connection with them; requests under way finish on the old one. Bad material is refused
   * (ERR_PIDFENCE_CLUSTER_TLS_FILE) and the old stays.
   */
  reload(tls: ClientTls): void {
    checkTrustMaterial(tls);
    const old = this.#agent;
    this.#agent = agentFor(tls);
    setTimeout(() => old.destroy(), REQUEST_TIMEOUT_MS).unref();
  }

  /**
   * One request; a non-2xx reply is returned, not thrown. Network failure is ERR_PIDFENCE_CLUSTER_UNREACHABLE.
   * `timeoutMs` (default 10 s) bounds a silent socket; a long-polled lease page passes its wait plus a margin.
   * `handshakeMs`, when given, bounds a new connection's TLS handshake alone (docs/decisions/0396).
   */
  send<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = REQUEST_TIMEOUT_MS,
    handshakeMs?: number,
  ): Promise<ClientReply<T>> {
    const url = new URL(path, this.#base);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        url,
        {
          method,
          agent: this.#agent,
          timeout: timeoutMs,
          headers:
            payload === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({ status: res.statusCode ?? 0, body: (text === '' ? null : JSON.parse(text)) as T });
          });
          res.on('error', (error) => reject(unreachable(error)));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      if (handshakeMs !== undefined && handshakeMs < timeoutMs)
        req.on('socket', (socket) => boundHandshake(req, socket, handshakeMs));
      req.on('error', (error) => reject(unreachable(error)));
      req.end(payload);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** A reused keep-alive connection is already through its handshake; a new one gets `limitMs` for it. */
function boundHandshake(req: ClientRequest, socket: Socket, limitMs: number): void {
  if (req.reusedSocket) return;
  const timer = setTimeout(() => req.destroy(new Error('timeout')), limitMs);
  timer.unref();
  socket.once('secureConnect', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
}

function agentFor(tls: ClientTls): Agent {
  return new Agent({
    cert: tls.cert,
    key: tls.key,
    ca: tls.ca,
    ...(tls.crl === undefined ? {} : { crl: tls.crl }),
    minVersion: 'TLSv1.3',
    keepAlive: true,
    maxSockets: 4,
  });
}

/** The reason is a fixed word (tls, refused, timeout, reset): never the peer's or the system's text. */
function unreachable(error: Error & { code?: string }): PidfenceError {
  const code = error.code ?? '';
  const reason =
    /CERT|SSL|TLS|ERR_SSL/.test(code) || /alert|certificate/i.test(error.message)
      ? 'tls'
      : code === 'ECONNREFUSED'
        ? 'refused'
        : error.message === 'timeout'
          ? 'timeout'
          : 'reset';
  return new PidfenceError(
    `the control plane could not be reached (${reason}); check its URL, that it runs, and the certificates.`,
    'ERR_PIDFENCE_CLUSTER_UNREACHABLE',
    { errno: reason },
  );
}
