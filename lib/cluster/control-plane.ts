// The control plane (docs/decisions/0102; design/cluster): an HTTPS server on Fastify 5, TLS 1.3 only,
// client certificates required and verified against the configured CA during the handshake, so a
// caller without one, or with a foreign CA's, never reaches a handler. The certificate's subject CN
// is the principal. It holds the PostgreSQL pool, never a PID: workers run and stop the jobs.
import { randomUUID } from 'node:crypto';
import type { TLSSocket } from 'node:tls';

import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { Pool } from 'pg';

import { PidfenceError } from '../base/errors';
import { OVERDUE_AFTER_DEFAULT_MS, validateId, validateOwner } from '../contract/index';
import { authorize, readExportedSummary, ManagementPlane, principalOf } from '../management/index';
import { PostgresDispatchRepository, PostgresExecutionStore, PostgresManagementStore, PostgresRunStore, postgresReadiness } from '../store/postgres/index';
import { DispatchAvailability } from './availability';
import { CancellationDispatchControl, DispatchFailedClosed, type DispatchControlTestHooks, type DispatchObservation } from './dispatch-control';
import { ClusterLeaseStore, type WorkerCaller } from './lease-store';
import { STATUS_ROOT, answerStatusPage } from '../web/status-page';
import { SCHEMAS } from './schemas';

export interface ControlPlaneTls {
  /** PEM of the server certificate, its key, and the CA that signs every client certificate. */
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
  readonly ca: string | Buffer;
}

export interface ControlPlaneOptions {
  /** The runtime role's connection string. */
  readonly databaseUrl: string;
  readonly tls: ControlPlaneTls;
  readonly host?: string;
  /** 0 picks a free port (see `port` on the started plane). */
  readonly port?: number;
  /** This process's stable replica owner id, the dispatch lease owner; default `cp-<uuid>`. */
  readonly replicaOwnerId?: string;
  /** The workers' run-dispatch lease (default 15 s). */
  readonly workerLeaseMs?: number;
  /** This replica's dispatch lease between claim and settlement (default 10 s). */
  readonly dispatchLeaseMs?: number;
  /** In-flight requests get this long on close, then their connections are cut (default 5 s). */
  readonly drainTimeoutMs?: number;
  readonly maxConnections?: number;
  /** Observation only (fixed states and codes). */
  readonly observe?: (observation: DispatchObservation) => void;
  /** TEST ONLY: handed to the cancellation wrapper (see DispatchControlTestHooks). */
  readonly testHooks?: DispatchControlTestHooks;
  /**
   * Serve GET /metrics (docs/decisions/0110): prom-client is loaded only when this is given. Gauges
   * are exported for `projects` only (docs/decisions/0112); the counters need no project.
   */
  readonly metrics?: { readonly projects?: readonly string[]; readonly overdueAfterMs?: number };
}

export interface ControlPlane {
  readonly url: string;
  readonly port: number;
  readonly replicaOwnerId: string;
  readonly availability: DispatchAvailability;
  /** How many requests reached the router (refused handshakes never do). */
  requestsHandled(): number;
  /** Stop accepting, drain in-flight requests (bounded), then close the pool. Idempotent. */
  close(): Promise<void>;
}

const BODY_LIMIT = 16 * 1024;

/** The principal of a verified peer: its certificate's subject CN (the handshake already verified it). */
function principalOfRequest(request: FastifyRequest): string {
  const socket = request.raw.socket as TLSSocket;
  const subject = socket.authorized ? socket.getPeerCertificate().subject : undefined;
  const cn = subject?.CN;
  const value = Array.isArray(cn) ? cn[0] : cn;
  if (typeof value !== 'string' || value === '') throw new PidfenceError('the client certificate has no subject CN to act as the principal.', 'ERR_PIDFENCE_CLUSTER_PRINCIPAL');
  return value;
}

function statusOf(error: PidfenceError): number {
  if (error instanceof DispatchFailedClosed || error.code === 'ERR_PIDFENCE_STORE_UNAVAILABLE') return 503;
  if (error.code === 'ERR_PIDFENCE_NOT_PERMITTED') return 403;
  if (error.code === 'ERR_PIDFENCE_CLUSTER_PRINCIPAL') return 401;
  if (/NOT_FOUND|RUN_MISSING/.test(error.code)) return 404;
  return /INVALID|CLUSTER_JOB|FENCE|SUBJECT|EXPECTATION|NOT_BLOCKED|STALE/.test(error.code) ? 400 : 409;
}

/** Low-sensitivity error replies: a code always; the sentence only for the caller's own mistakes. */
function replyError(reply: FastifyReply, error: unknown): FastifyReply {
  if (error instanceof PidfenceError) {
    const status = statusOf(error);
    return reply.code(status).send(status >= 500 ? { code: error.code } : { code: error.code, message: error.message });
  }
  const validation = (error as { validation?: unknown; statusCode?: number }) ?? {};
  if (validation.validation !== undefined) return reply.code(400).send({ code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST', message: 'the request body does not match the endpoint schema; see docs/decisions/0102.' });
  if (validation.statusCode === 413) return reply.code(413).send({ code: 'ERR_PIDFENCE_CLUSTER_BODY_TOO_LARGE' });
  return reply.code(500).send({ code: 'ERR_PIDFENCE_CLUSTER_INTERNAL' });
}

/** What GET /metrics serves; undefined when metrics were not asked for. */
interface MetricsEndpoint {
  readonly contentType: string;
  exposition(): Promise<string>;
}

interface Services {
  readonly metrics: MetricsEndpoint | undefined;
  readonly leases: ClusterLeaseStore;
  readonly control: CancellationDispatchControl;
  readonly runStore: PostgresRunStore;
  readonly managementStore: PostgresManagementStore;
  readonly availability: DispatchAvailability;
  readonly pool: Pool;
}

function addRoutes(app: FastifyInstance, services: Services): void {
  const { leases, control, runStore, managementStore: management, availability, pool, metrics } = services;
  const caller = (request: FastifyRequest): WorkerCaller => ({ principal: principalOfRequest(request), sessionId: (request.body as { sessionId: string }).sessionId });
  const plane = (request: FastifyRequest): ManagementPlane => new ManagementPlane({ store: management, principal: principalOfRequest(request) });

  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async (_request, reply) => {
    const state = availability.state();
    if (!state.ready) return reply.code(503).send({ ready: false, code: state.code });
    try {
      await postgresReadiness(pool);
    } catch (error) {
      return reply.code(503).send({ ready: false, code: error instanceof PidfenceError ? error.code : 'ERR_PIDFENCE_STORE_UNAVAILABLE' });
    }
    return { ready: true };
  });

  // Aggregates only, with bounded labels: any certificate of the cluster CA may scrape (docs/decisions/0110).
  if (metrics !== undefined) {
    app.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).header('cache-control', 'no-store').send(await metrics.exposition()));
  }
  // The status page (docs/decisions/0111): HTML through the management plane, as the certificate's subject.
  const statusPage = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const page = await answerStatusPage(request.url, () => plane(request));
    return reply.code(page.status).headers(page.headers).send(page.body);
  };
  app.get(STATUS_ROOT, statusPage);
  app.get(`${STATUS_ROOT}/*`, statusPage);

  app.post('/v1/sessions', { schema: SCHEMAS.empty }, async (request) => ({ sessionId: await leases.registerSession(principalOfRequest(request)) }));
  app.post('/v1/sessions/end', { schema: SCHEMAS.session }, async (request) => ({ ended: await leases.endSession(caller(request)) }));
  app.post('/v1/assignments/pull', { schema: SCHEMAS.session }, async (request) => leases.pull(caller(request)));
  app.post('/v1/lease-control', { schema: SCHEMAS.lease }, async (request) => control.tick(caller(request), request.body as { runId: string; attemptId: string; fence: number }));
  app.post('/v1/completions', { schema: SCHEMAS.completion }, async (request) => {
    const body = request.body as Parameters<ClusterLeaseStore['complete']>[1] & { sessionId: string };
    const { sessionId: _session, ...report } = body;
    return leases.complete(caller(request), report);
  });

  // The management plane, behind the same grants as the CLI (docs/decisions/0040).
  app.post('/v1/jobs', { schema: SCHEMAS.job }, async (request) => {
    const job = request.body as { runId: string; projectId: string; argv: string[]; timeoutMs?: number };
    await authorize(management, principalOf(principalOfRequest(request)), job.projectId, 'run.stop');
    return { result: await leases.enqueueJob(job) };
  });
  app.post('/v1/runs/:runId/cancel', { schema: SCHEMAS.runParam }, async (request) => {
    const runId = validateId((request.params as { runId: string }).runId, 'runId');
    const run = await runStore.getRun(runId);
    if (run === null) throw new PidfenceError(`${runId} does not exist in this store.`, 'ERR_PIDFENCE_RUN_MISSING');
    await authorize(management, principalOf(principalOfRequest(request)), run.projectId, 'run.stop');
    const outcome = await runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
    const endedQueued = outcome.kind === 'requested' || outcome.kind === 'already_requested' ? await leases.cancelIfQueued(runId) : false;
    return { result: outcome.kind, ...(endedQueued ? { run: 'cancelled' } : {}) };
  });
  app.get('/v1/runs/:runId/dispatch', { schema: SCHEMAS.runParam }, async (request) => plane(request).inspect((request.params as { runId: string }).runId));
  app.post('/v1/runs/:runId/rearm', { schema: SCHEMAS.rearm }, async (request) =>
    plane(request).rearm((request.params as { runId: string }).runId, request.body as never));
  app.get('/v1/projects/:projectId/status', { schema: SCHEMAS.projectParam }, async (request) => plane(request).summary((request.params as { projectId: string }).projectId));
  app.get('/v1/projects/:projectId/blocked', { schema: SCHEMAS.projectParam }, async (request) => {
    const { cursor } = request.query as { cursor?: string };
    return plane(request).blockedPage((request.params as { projectId: string }).projectId, cursor);
  });
}

/** Starts one replica: opens the pool (readiness checked), listens, and returns its handle. */
export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const replicaOwnerId = validateOwner(options.replicaOwnerId ?? `cp-${randomUUID()}`);
  const pool = new Pool({ connectionString: options.databaseUrl, max: options.maxConnections ?? 8 });
  pool.on('error', () => undefined);
  const app = Fastify({
    https: { key: options.tls.key, cert: options.tls.cert, ca: options.tls.ca, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' },
    bodyLimit: BODY_LIMIT,
    logger: false,
    forceCloseConnections: 'idle',
  });
  try {
    await postgresReadiness(pool);
    const dispatchLeaseMs = options.dispatchLeaseMs ?? 10_000;
    const availability = new DispatchAvailability(dispatchLeaseMs);
    const management = new PostgresManagementStore(pool);
    const metrics = options.metrics === undefined ? undefined : await createMetricsEndpoint(management, options.metrics);
    const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), { leaseDurationMs: options.workerLeaseMs ?? 15_000 });
    const control = new CancellationDispatchControl(leases, new PostgresDispatchRepository(pool), {
      replicaOwnerId, leaseDurationMs: dispatchLeaseMs, availability, ...(options.observe === undefined ? {} : { observe: options.observe }),
      ...(options.testHooks === undefined ? {} : { testHooks: options.testHooks }),
      ...(metrics === undefined ? {} : { observer: metrics.observer }),
    });
    let handled = 0;
    app.addHook('onRequest', async () => {
      handled++;
    });
    app.setErrorHandler((error, _request, reply) => replyError(reply, error));
    addRoutes(app, { leases, control, runStore: new PostgresRunStore(pool), managementStore: management, availability, pool, metrics });
    await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    return { url: `https://${options.host ?? '127.0.0.1'}:${port}`, port, replicaOwnerId, availability, requestsHandled: () => handled, close: closer(app, pool, options.drainTimeoutMs ?? 5_000) };
  } catch (error) {
    await app.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    throw error;
  }
}

/** prom-client is loaded here, on demand, and nowhere else in the control plane (docs/decisions/0110). */
async function createMetricsEndpoint(management: PostgresManagementStore, options: NonNullable<ControlPlaneOptions['metrics']>): Promise<MetricsEndpoint & { readonly observer: import('../dispatch/index').DispatchObserver }> {
  const { createMetrics } = await import('../metrics/index');
  const overdueAfterMs = options.overdueAfterMs ?? OVERDUE_AFTER_DEFAULT_MS;
  return createMetrics({ projects: options.projects ?? [], overdueAfterMs, readProject: (projectId) => readExportedSummary(management, projectId, overdueAfterMs) });
}

function closer(app: FastifyInstance, pool: Pool, drainTimeoutMs: number): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const cut = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          app.server.closeAllConnections();
          resolve();
        }, drainTimeoutMs);
      });
      await Promise.race([app.close(), cut]);
      clearTimeout(timer);
      await pool.end();
    })();
    return closing;
  };
}
