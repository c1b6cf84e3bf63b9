// The HTTP server of `pidfence supervise --metrics-port` (docs/decisions/0110, 0111): GET /metrics for
// Prometheus and, on a SQLite store, the status page for the OS user on the other end of a loopback
// connection. Plain node:http (no framework on a router), GET and HEAD only, bounded in connections
// and time; loopback by default. It holds no authority: it reads through the management plane.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

import { PidfenceError } from '../base/errors';
import { ManagementPlane, type ManagementStore } from '../management/index';
import { isLoopback, findLoopbackPeerUid, peerUnknown, UidSubjects } from './loopback-peer';
import { STATUS_ROOT, answerStatusPage, renderError, type HtmlReply } from './status-page';

/** What /metrics serves (lib/metrics); the server itself never loads prom-client. */
export interface MetricsSource {
  readonly contentType: string;
  exposition(): Promise<string>;
}

export interface LocalServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly metrics: MetricsSource;
  /** The store's management plane for the status page; null when this store's principal is not the OS user (PostgreSQL). */
  readonly management: ManagementStore | null;
  readonly overdueAfterMs?: number;
}

export interface LocalServer {
  readonly url: string;
  readonly port: number;
  /** Stops accepting and closes every connection. Idempotent. */
  close(): Promise<void>;
}

const CONNECTIONS_MAX = 32;
const REQUEST_TIMEOUT_MS = 10_000;

function send(response: ServerResponse, reply: HtmlReply, head: boolean): void {
  response.writeHead(reply.status, reply.headers);
  response.end(head ? undefined : reply.body);
}

/** The status page of a SQLite store, as the OS user on the other end of the loopback connection. */
function statusReplier(options: LocalServerOptions): (request: IncomingMessage) => Promise<HtmlReply> {
  const subjects = new UidSubjects();
  return async (request) => {
    const { management } = options;
    if (management === null) {
      return renderError(
        404,
        'this store is PostgreSQL, where a principal is a database role, not an OS user: its status page is served by `pidfence control-plane`.',
        'ERR_PIDFENCE_STATUS_NOT_HERE',
      );
    }
    const socket = request.socket;
    const uid = isLoopback(socket.remoteAddress) ? findLoopbackPeerUid(socket) : null;
    // The subject is resolved before the page renders; a refusal is a page, never a thrown error.
    const subject = uid === null ? null : await subjects.subjectOf(uid);
    return answerStatusPage(request.url ?? STATUS_ROOT, () => {
      if (subject === null) throw peerUnknown();
      return new ManagementPlane({
        store: management,
        principal: subject,
        ...(options.overdueAfterMs === undefined ? {} : { overdueAfterMs: options.overdueAfterMs }),
      });
    });
  };
}

/** GET and HEAD of /metrics and the status page; anything else is a page that says what is here. */
function requestHandler(
  options: LocalServerOptions,
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const statusReply = statusReplier(options);
  return async (request, response) => {
    const head = request.method === 'HEAD';
    if (request.method !== 'GET' && !head) {
      const refused = renderError(405, 'only GET and HEAD are served here.', 'ERR_PIDFENCE_STATUS_METHOD');
      send(response, { ...refused, headers: { ...refused.headers, allow: 'GET, HEAD' } }, head);
      return;
    }
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    if (path === '/metrics') {
      const text = await options.metrics.exposition();
      response.writeHead(200, { 'content-type': options.metrics.contentType, 'cache-control': 'no-store' });
      response.end(head ? undefined : text);
      return;
    }
    if (path === STATUS_ROOT || path.startsWith(`${STATUS_ROOT}/`)) {
      send(response, await statusReply(request), head);
      return;
    }
    send(
      response,
      renderError(
        404,
        `nothing here: ${STATUS_ROOT} is the status page, /metrics the metrics.`,
        'ERR_PIDFENCE_STATUS_NO_PAGE',
      ),
      head,
    );
  };
}

/** Listens, or refuses with one sentence that says what to change. */
function listen(server: Server, options: LocalServerOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException): void =>
      reject(
        new PidfenceError(
          `the metrics server cannot listen on ${options.host}:${options.port} (${error.code ?? 'error'}); pick another --metrics-port or --metrics-host.`,
          'ERR_PIDFENCE_METRICS_LISTEN',
          { errno: error.code ?? 'UNKNOWN' },
        ),
      );
    server.once('error', failed);
    server.listen(options.port, options.host, () => {
      server.removeListener('error', failed);
      resolve();
    });
  });
}

/** Close: stop accepting and cut every open connection, once. */
function closerOf(server: Server): () => Promise<void> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  let closing: Promise<void> | null = null;
  return () => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };
}

export async function startLocalServer(options: LocalServerOptions): Promise<LocalServer> {
  const handle = requestHandler(options);
  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent)
        send(response, renderError(500, 'the request failed.', 'ERR_PIDFENCE_STATUS_PAGE_FAILED'), false);
      else response.destroy();
    });
  });
  server.maxConnections = CONNECTIONS_MAX;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = REQUEST_TIMEOUT_MS;
  const close = closerOf(server);
  await listen(server, options);
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return { url: `http://${host}:${port}`, port, close };
}
