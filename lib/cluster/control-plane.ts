// The control plane (docs/decisions/0102; design/cluster): an HTTPS server on Fastify 5, TLS 1.3 only,
// client certificates required and verified against the configured CA during the handshake, so a
// caller without one, or with a foreign CA's, never reaches a handler. The certificate's subject CN
// is the principal. It holds the PostgreSQL pool, never a PID: workers run and stop the jobs.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Server as TlsServer, TLSSocket } from 'node:tls';

import type { FastifyInstance, FastifyReply, FastifyRequest, default as FastifyFactory } from 'fastify';
import { Pool } from 'pg';

import { httpStatusOf } from '../base/error-registry';
import { isPidfenceInputError, PidfenceError, type PidfenceInputError } from '../base/errors';
import { requirePeer } from '../base/optional-peers';
import {
  ID_MAX_LENGTH,
  OVERDUE_AFTER_DEFAULT_MS,
  OWNER_MAX_LENGTH,
  validateId,
  validateOwner,
  type RunStatus,
  type WorkerHold,
} from '../contract/index';
import {
  authorize,
  authorizeCancel,
  readExportedSummary,
  ManagementPlane,
  principalOf,
  runFinished,
  runNotVisible,
} from '../management/index';
import {
  ClusterLeaseStore,
  PostgresDispatchRepository,
  PostgresExecutionStore,
  PostgresManagementStore,
  PostgresRunStore,
  postgresReadiness,
  readWorkerFleet,
  validateCompletionPage,
  type CompletionReport,
  type LeaseRef,
  type UnnamedLease,
  type WorkerCaller,
} from '../store/postgres/index';
import { DispatchAvailability } from './availability';
import {
  CancellationDispatchControl,
  DispatchFailedClosed,
  type ControlledTickPage,
  type DispatchControlTestHooks,
  type DispatchObservation,
} from './dispatch-control';
import { CancelWakeups } from './cancel-wakeups';
import { SessionActivity } from './session-activity';
import { STATUS_ROOT, answerStatusPage } from '../web/status-page';
import { answerWorkersPage, WORKERS_PATH } from '../web/workers-page';
import { FleetControl, type FleetObserver } from './fleet';
import { FLEET_SCHEMAS } from './fleet-schemas';
import { contractRefusalOf, SCHEMAS } from './schemas';
import { ServerTrust, type TrustMaterial } from './tls-trust';

export interface ControlPlaneTls extends TrustMaterial {
  /** PEM of the server certificate, its key, and the CA that signs every client certificate. */
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
  readonly ca: string | Buffer;
  /** PEM revocation lists of the CA (docs/decisions/0242): a listed client certificate is refused. */
  readonly crl?: string | Buffer;
}

export interface ControlPlaneOptions {
  /** The runtime role's connection string. */
  readonly databaseUrl: string;
  readonly tls: ControlPlaneTls;
  readonly host?: string;
  /** 0 picks a free port (see `port` on the started plane). */
  readonly port?: number;
  /**
   * This replica's stable owner id, the dispatch lease owner (design/cluster §D6): default
   * `cp-<host name>:<port>` for a fixed port, the same after a restart; `cp-<host name>:<uuid>` for port 0.
   */
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
  /**
   * How many requests reached the router (refused handshakes never do); with `route` (as declared,
   * such as '/v1/completions/page'), how many of them were for that route.
   */
  requestsHandled(route?: string): number;
  /**
   * Replaces certificate, key, CA and CRL without a restart (docs/decisions/0242): new handshakes use
   * them at once; older connections close after their next request. Bad material is refused with
   * ERR_PIDFENCE_CLUSTER_TLS_FILE or ERR_PIDFENCE_CLUSTER_CRL_INVALID and the trust in force is kept.
   */
  reloadTls(tls: ControlPlaneTls): void;
  /** Stop accepting, drain in-flight requests (bounded), then close the pool. Idempotent. */
  close(): Promise<void>;
}

const BODY_LIMIT = 16 * 1024;
/** The longest path parameter as sent: an id or worker name with every character percent-encoded. */
const PARAM_LENGTH_MAX = 3 * Math.max(ID_MAX_LENGTH, OWNER_MAX_LENGTH);
/** A lease page names up to 1,024 leases of about 120 bytes each. */
const LEASE_PAGE_BODY_LIMIT = 256 * 1024;
/** A completion page carries up to 64 reports of at most about 450 bytes each. */
const COMPLETION_PAGE_BODY_LIMIT = 64 * 1024;

/** The principal of a verified peer: its certificate's subject CN (the handshake already verified it). */
function principalOfRequest(request: FastifyRequest): string {
  const socket = request.raw.socket as TLSSocket;
  const subject = socket.authorized ? socket.getPeerCertificate().subject : undefined;
  const cn = subject?.CN;
  const value = Array.isArray(cn) ? cn[0] : cn;
  if (typeof value !== 'string' || value === '')
    throw new PidfenceError(
      'the client certificate has no subject CN to act as the principal.',
      'ERR_PIDFENCE_CLUSTER_PRINCIPAL',
    );
  return value;
}

/** The registry's HTTP status (docs/decisions/0224); a stop path that failed closed is unavailable, whatever its code. */
function statusOf(error: PidfenceError | PidfenceInputError): number {
  return error instanceof DispatchFailedClosed ? 503 : httpStatusOf(error.code);
}

/** Low-sensitivity error replies: a code always; the sentence only for the caller's own mistakes. */
function replyError(reply: FastifyReply, error: unknown): FastifyReply {
  const refusal = contractRefusalOf(error ?? {}, reply.request);
  if (refusal !== null) return replyError(reply, refusal);
  // Bad input from a validator (PidfenceTypeError / RangeError) is the caller's mistake, typed like the rest.
  if (error instanceof PidfenceError || isPidfenceInputError(error)) {
    const status = statusOf(error);
    return reply.code(status).send(status >= 500 ? { code: error.code } : { code: error.code, message: error.message });
  }
  const validation = (error as { validation?: unknown; statusCode?: number }) ?? {};
  if (validation.validation !== undefined)
    return reply.code(400).send({
      code: 'ERR_PIDFENCE_CLUSTER_INVALID_REQUEST',
      message: 'the request body does not match the endpoint schema; see docs/decisions/0102.',
    });
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
  readonly fleet: FleetControl;
  readonly trust: ServerTrust;
  readonly leases: ClusterLeaseStore;
  readonly control: CancellationDispatchControl;
  readonly runStore: PostgresRunStore;
  readonly managementStore: PostgresManagementStore;
  readonly availability: DispatchAvailability;
  readonly pool: Pool;
  readonly wakeups: CancelWakeups;
  readonly sessions: SessionActivity;
}

const workerCaller = (request: FastifyRequest): WorkerCaller => ({
  principal: principalOfRequest(request),
  sessionId: (request.body as { sessionId: string }).sessionId,
});

function addRoutes(app: FastifyInstance, services: Services): void {
  const plane = (request: FastifyRequest): ManagementPlane =>
    new ManagementPlane({ store: services.managementStore, principal: principalOfRequest(request) });
  const fleetHooks = addFleetHooks(app, services);
  addHealthRoutes(app, services, plane);
  addWorkerRoutes(app, services, fleetHooks);
  addManagementRoutes(app, services, plane);
  addRunAndFleetRoutes(app, services, plane);
}

/** Health, readiness, /metrics and the status page. */
function addHealthRoutes(
  app: FastifyInstance,
  { availability, pool, metrics }: Services,
  plane: (request: FastifyRequest) => ManagementPlane,
): void {
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async (_request, reply) => {
    const state = availability.state();
    if (!state.ready) return reply.code(503).send({ ready: false, code: state.code });
    try {
      await postgresReadiness(pool);
    } catch (error) {
      return reply
        .code(503)
        .send({ ready: false, code: error instanceof PidfenceError ? error.code : 'ERR_PIDFENCE_STORE_UNAVAILABLE' });
    }
    return { ready: true };
  });
  // Aggregates only, with bounded labels: any certificate of the cluster CA may scrape (docs/decisions/0110).
  if (metrics !== undefined) {
    app.get('/metrics', async (_request, reply) =>
      reply
        .type(metrics.contentType)
        .header('cache-control', 'no-store')
        .send(await metrics.exposition()),
    );
  }
  // The status page (docs/decisions/0111): HTML through the management plane, as the certificate's subject.
  const statusPage = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const page = await answerStatusPage(request.url, () => plane(request));
    return reply.code(page.status).headers(page.headers).send(page.body);
  };
  app.get(STATUS_ROOT, statusPage);
  app.get(`${STATUS_ROOT}/*`, statusPage);
}

/** The worker's calls: its session, its pull, the lease control of a stop, its completions. */
function addWorkerRoutes(app: FastifyInstance, services: Services, fleetHooks: ReturnType<typeof addFleetHooks>): void {
  const { leases, control } = services;
  app.post('/v1/sessions', { schema: SCHEMAS.empty }, async (request) => ({
    sessionId: await leases.registerSession(principalOfRequest(request)),
  }));
  // Read before a session exists, so a worker whose tick would let it lapse changes nothing (docs/decisions/0430).
  app.post('/v1/sessions/terms', { schema: SCHEMAS.empty }, async () => ({ leaseMs: leases.leaseDurationMs }));
  app.post('/v1/sessions/end', { schema: SCHEMAS.session }, async (request) => ({
    ended: await leases.endSession(workerCaller(request)),
  }));
  app.post('/v1/assignments/pull', { schema: SCHEMAS.pull, ...fleetHooks.pull }, async (request) => {
    const { max, pullId } = request.body as { max?: number; pullId?: string };
    return max === undefined
      ? leases.pull(workerCaller(request), pullId)
      : leases.pullPage(workerCaller(request), max, pullId);
  });
  app.post('/v1/lease-control', { schema: SCHEMAS.lease }, async (request) =>
    control.tick(workerCaller(request), request.body as { runId: string; attemptId: string; fence: number }),
  );
  app.post('/v1/workers/leases', { schema: SCHEMAS.leasePage, bodyLimit: LEASE_PAGE_BODY_LIMIT }, async (request) => {
    const body = request.body as { leases: LeaseRef[]; waitMs?: number };
    return answerLeasePage(services, workerCaller(request), body.leases, body.waitMs ?? 0);
  });
  // A restarted worker re-attaches its runs (docs/decisions/0272), then gets the tick's answer at once: a pending stop is delivered now.
  app.post('/v1/leases/attach', { schema: SCHEMAS.lease }, async (request) => {
    const ref = request.body as { runId: string; attemptId: string; fence: number };
    await leases.attach(workerCaller(request), ref);
    return control.tick(workerCaller(request), ref);
  });
  // A restarted worker settles an earlier session of its journal (docs/decisions/0360): what it holds and no lease file names never started.
  app.post('/v1/sessions/settle', { schema: SCHEMAS.settle }, async (request) =>
    leases.settleEarlierSession(workerCaller(request), (request.body as { earlierSessionId: string }).earlierSessionId),
  );
  app.post('/v1/completions', { schema: SCHEMAS.completion, ...fleetHooks.completion }, async (request) => {
    const body = request.body as Parameters<ClusterLeaseStore['complete']>[1] & { sessionId: string };
    const { sessionId: _session, ...report } = body;
    return leases.complete(workerCaller(request), report);
  });
  // A page of completion reports, each answered as /v1/completions answers it alone (docs/decisions/0432).
  app.post(
    '/v1/completions/page',
    { schema: SCHEMAS.completionPage, bodyLimit: COMPLETION_PAGE_BODY_LIMIT, ...fleetHooks.completionPage },
    async (request) => {
      const { completions } = request.body as { completions: CompletionReport[] };
      return { answers: await leases.completePage(workerCaller(request), completions) };
    },
  );
}

/** The management plane, behind the same grants as the CLI (docs/decisions/0040). */
function addManagementRoutes(
  app: FastifyInstance,
  services: Services,
  plane: (request: FastifyRequest) => ManagementPlane,
): void {
  const { leases, runStore, managementStore: management } = services;
  app.post('/v1/jobs', { schema: SCHEMAS.job }, async (request) => {
    const job = request.body as { runId: string; projectId: string; argv: string[]; timeoutMs?: number; name?: string };
    await authorize(management, principalOf(principalOfRequest(request)), job.projectId, 'run.stop');
    return { result: await leases.enqueueJob(job) };
  });
  app.post('/v1/runs/:runId/cancel', { schema: SCHEMAS.runParam }, async (request) => {
    const runId = validateId((request.params as { runId: string }).runId, 'runId');
    // The CLI's cancel rule and codes (docs/decisions/0043, 0224): a run the caller cannot read is not found.
    await authorizeCancel(management, principalOf(principalOfRequest(request)), runId, await runStore.getRun(runId));
    const outcome = await runStore.requestCancellation({ runId, reason: 'user', eventId: `evt-${randomUUID()}` });
    if (outcome.kind === 'run_missing') throw runNotVisible(runId);
    if (outcome.kind === 'run_terminal') throw runFinished(runId);
    const endedQueued =
      outcome.kind === 'requested' || outcome.kind === 'already_requested' ? await leases.cancelIfQueued(runId) : false;
    return { result: outcome.kind, ...(endedQueued ? { run: 'cancelled' } : {}) };
  });
  app.post('/v1/projects/:projectId/cancel', { schema: SCHEMAS.projectCancel }, async (request) =>
    cancelProject(services, principalOfRequest(request), (request.params as { projectId: string }).projectId),
  );
  app.get('/v1/runs/:runId/dispatch', { schema: SCHEMAS.runParam }, async (request) =>
    plane(request).inspect((request.params as { runId: string }).runId),
  );
  app.post('/v1/runs/:runId/rearm', { schema: SCHEMAS.rearm }, async (request) =>
    plane(request).rearm((request.params as { runId: string }).runId, request.body as never),
  );
  app.get('/v1/projects/:projectId/status', { schema: SCHEMAS.projectParam }, async (request) => {
    const projectId = (request.params as { projectId: string }).projectId;
    const summary = await plane(request).summary(projectId);
    // Counted on the card as its own state (docs/decisions/0270), after the grant check above.
    return { ...summary, unreachable: await leases.unreachableInProject(projectId) };
  });
  app.get('/v1/projects/:projectId/blocked', { schema: SCHEMAS.projectParam }, async (request) => {
    const { cursor } = request.query as { cursor?: string };
    return plane(request).blockedPage((request.params as { projectId: string }).projectId, cursor);
  });
}

/**
 * One worker's lease page (docs/decisions/0200, 0201): the page is answered at once when anything
 * but renewals is due; else the request waits up to `waitMs` for a committed cancel of one of its
 * runs (a NOTIFY hint), and the page runs once more. The claim, settlement and release order of
 * each stop is the wrapper's (design/cluster §D3); the wait decides nothing.
 */
async function answerLeasePage(
  services: Services,
  who: WorkerCaller,
  refs: readonly LeaseRef[],
  waitMs: number,
): Promise<unknown> {
  const { leases, control, wakeups, sessions } = services;
  await leases.reapIfDue().catch(() => 0);
  // Watched before the read: a cancel committed after it wakes the wait (docs/decisions/0438).
  const watch = wakeups.watch(waitMs > 0 ? refs.map((ref) => ref.runId) : []);
  let page: ControlledTickPage;
  let unnamed: UnnamedLease[];
  try {
    page = await control.tickPage(who, refs);
    unnamed = await unnamedOf(services, who, refs, page.session);
    const quiet = page.answers.size === 0 && unnamed.length === 0 && page.session === 'live';
    if (quiet && (await watch.woken(waitMs))) page = await control.tickPage(who, refs);
  } finally {
    watch.close();
  }
  sessions.seen(who.sessionId, refs.length);
  return {
    session: page.session,
    expiresAtMs: page.expiresAtMs,
    answers: [
      ...[...page.answers].map(([runId, answer]) => ({ runId, ...answer })),
      ...unnamed.map((lease) => ({ ...lease, kind: 'unnamed' as const })),
    ],
  };
}

/**
 * The leases a live session holds and its page did not name, looked for now and then
 * (docs/decisions/0434): a pull whose answer the worker never got. The worker ends each one it does
 * not hold as never started. A failed look is the next look's.
 */
async function unnamedOf(
  { leases, sessions }: Services,
  who: WorkerCaller,
  refs: readonly LeaseRef[],
  session: string,
): Promise<UnnamedLease[]> {
  if (session !== 'live' || !sessions.unnamedLookDue(who.sessionId)) return [];
  return leases.unnamedLeases(who, refs).catch(() => []);
}

/**
 * A project-wide cancel (docs/decisions/0203, 0320): the caller needs run.stop on the project, as for
 * one run; every run of it not yet ended gets its durable cancel intent and a queued one ends
 * cancelled, in one statement (migration 0018); a running one is stopped by its worker's waiting
 * page, woken by the intent's NOTIFY. Bounded per request: `more` asks the caller to repeat.
 */
async function cancelProject(
  { managementStore, runStore }: Services,
  subject: string,
  projectText: string,
): Promise<{ requested: number; cancelledQueued: number; more: boolean }> {
  const projectId = validateId(projectText, 'projectId');
  await authorize(managementStore, principalOf(subject), projectId, 'run.stop');
  return runStore.requestProjectCancellation({ projectId, reason: 'user' });
}

/**
 * The cluster views say `unreachable` for a running run whose worker stopped renewing (docs/decisions/
 * 0270), with the time it was marked. The stored status stays `running`: the run is active, a cancel is
 * taken, and it ends only on its worker's proof or an operator's forget.
 */
async function withReachability<T extends { readonly runId: string; readonly status: string }>(
  leases: ClusterLeaseStore,
  runs: readonly T[],
): Promise<T[]> {
  const since = await leases.unreachableSince(runs.filter((run) => run.status === 'running').map((run) => run.runId));
  return runs.map((run) => {
    const at = since.get(run.runId);
    return at === undefined ? run : { ...run, status: 'unreachable', unreachableSinceMs: at };
  });
}

const ACTIVE: WorkerHold = { admission: 'active', revoked: false };

/**
 * On every request but /health (docs/decisions/0240, 0242): a certificate the loaded CRLs revoke is
 * refused, even on a connection older than the list; a connection older than the last trust reload
 * is closed after this request; a revoked worker name is refused (one read, no write). Returns the
 * pull's hooks: a cordoned worker's pull hands out nothing, and a run handed out while a drain
 * committed is asked to stop at once.
 */
function addFleetHooks(app: FastifyInstance, { fleet, trust }: Services) {
  const holds = new WeakMap<FastifyRequest, WorkerHold>();
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.url === '/health') return undefined;
    const peer = trust.check(request.raw.socket as TLSSocket);
    if (peer === 'revoked') {
      fleet.refused('certificate_revoked');
      return reply.code(403).header('connection', 'close').send({
        code: 'ERR_PIDFENCE_CLUSTER_CERT_REVOKED',
        message: 'this client certificate is on the revocation list of the cluster CA; use a new certificate.',
      });
    }
    if (peer === 'older') reply.header('connection', 'close');
    holds.set(request, await fleet.admit(principalOfRequest(request)));
    return undefined;
  });
  const pull = {
    preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { sessionId } = request.body as { sessionId: string };
      const heldBack = await fleet.holdBackPull(principalOfRequest(request), sessionId, holds.get(request) ?? ACTIVE);
      return heldBack === null ? undefined : reply.send(heldBack);
    },
    preSerialization: async (request: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
      const pulled = payload as {
        kind?: string;
        assignment?: { runId: string };
        assignments?: ReadonlyArray<{ runId: string }>;
      };
      // Best effort: a failure here must not lose the assignment; a repeated drain asks the stop again.
      const runs =
        pulled.kind !== 'assigned'
          ? []
          : (pulled.assignments ?? (pulled.assignment === undefined ? [] : [pulled.assignment]));
      for (const { runId } of runs)
        await fleet.afterAssignment(principalOfRequest(request), runId).catch(() => undefined);
      return payload;
    },
  };
  // The lease store checks a completion's session, attempt and fence, not whose session it is.
  const completion = {
    preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { sessionId } = request.body as { sessionId: string };
      return (await fleet.ownsSession(principalOfRequest(request), sessionId))
        ? undefined
        : reply.send({ kind: 'lost' });
    },
  };
  // The page's equivalent: a page checked whole first, then every report of another name's session is `lost`.
  const completionPage = {
    preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { sessionId, completions } = request.body as { sessionId: string; completions: CompletionReport[] };
      const reports = validateCompletionPage(completions);
      return (await fleet.ownsSession(principalOfRequest(request), sessionId))
        ? undefined
        : reply.send({ answers: reports.map(({ ref }) => ({ runId: ref.runId, kind: 'lost' })) });
    },
  };
  return { pull, completion, completionPage };
}

/** The run views the CLI reads with --control-plane (docs/decisions/0243), and the fleet (docs/decisions/0241, 0245). */
function addRunAndFleetRoutes(
  app: FastifyInstance,
  { fleet, leases }: Services,
  plane: (request: FastifyRequest) => ManagementPlane,
): void {
  app.get('/v1/runs/:runId', { schema: SCHEMAS.runParam }, async (request) => {
    const [run] = await withReachability(leases, [
      await plane(request).showRun((request.params as { runId: string }).runId),
    ]);
    return run;
  });
  app.get('/v1/projects/:projectId/runs', { schema: FLEET_SCHEMAS.runList }, async (request) => {
    const { state, cursor, limit } = request.query as { state?: RunStatus; cursor?: string; limit?: number };
    const page = await plane(request).listRuns({
      projectId: (request.params as { projectId: string }).projectId,
      ...(state === undefined ? {} : { state }),
      ...(cursor === undefined ? {} : { cursor }),
      ...(limit === undefined ? {} : { limit }),
    });
    return { ...page, items: await withReachability(leases, page.items) };
  });
  app.post('/v1/workers/self', { schema: FLEET_SCHEMAS.announce }, async (request) => {
    const name = principalOfRequest(request);
    return { name, admission: (await fleet.announce(name, request.body)).admission };
  });
  app.get('/v1/workers', async (request) => fleet.list(principalOfRequest(request)));
  app.post('/v1/workers/:name/:action', { schema: FLEET_SCHEMAS.act }, async (request) => {
    const { name, action } = request.params as { name: string; action: string };
    return fleet.act(principalOfRequest(request), name, action);
  });
  app.get(WORKERS_PATH, async (request, reply) => {
    const page = await answerWorkersPage(async () => {
      const subject = principalOfRequest(request);
      return { fleet: await fleet.list(subject), subject };
    });
    return reply.code(page.status).headers(page.headers).send(page.body);
  });
}

/** The same id after a restart on the same host and port (docs/decisions/0202). */
function stableReplicaId(options: ControlPlaneOptions): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 64) || 'host';
  const port = options.port ?? 0;
  return `cp-${host}:${port === 0 ? randomUUID().slice(0, 8) : port}`;
}

/** Starts one replica: opens the pool (readiness checked), listens, and returns its handle. */
export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  // Fastify is an optional peer (docs/decisions/0223): loaded here, for the control plane only.
  const Fastify = requirePeer<typeof FastifyFactory>(
    'fastify',
    'the control plane (pidfence control-plane, startControlPlane)',
  );
  const replicaOwnerId = validateOwner(options.replicaOwnerId ?? stableReplicaId(options));
  const pool = new Pool({ connectionString: options.databaseUrl, max: options.maxConnections ?? 8 });
  pool.on('error', () => undefined);
  const wakeups = new CancelWakeups(options.databaseUrl);
  const app = replicaServer(Fastify, options.tls);
  try {
    await postgresReadiness(pool);
    const replica = await wireReplica(app, { options, pool, wakeups, replicaOwnerId });
    await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    return {
      url: `https://${options.host ?? '127.0.0.1'}:${port}`,
      port,
      replicaOwnerId,
      availability: replica.availability,
      requestsHandled: replica.requestsHandled,
      reloadTls: (tls) => replica.trust.reload(tls),
      close: closer(app, pool, wakeups, options.drainTimeoutMs ?? 5_000, replica.reaper),
    };
  } catch (error) {
    await app.close().catch(() => undefined);
    await wakeups.close();
    await pool.end().catch(() => undefined);
    throw error;
  }
}

/** TLS 1.3 only, a client certificate required and verified during the handshake. */
function replicaServer(Fastify: typeof FastifyFactory, tls: ControlPlaneTls) {
  return Fastify({
    https: {
      key: tls.key,
      cert: tls.cert,
      ca: tls.ca,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
    },
    bodyLimit: BODY_LIMIT,
    // Fastify refuses a path parameter over 100 characters; a contract id is up to 128 (docs/decisions/0260).
    routerOptions: { maxParamLength: PARAM_LENGTH_MAX },
    // Fastify's default strips unknown fields; docs/decisions/0102 refuses them.
    ajv: { customOptions: { removeAdditional: false } },
    logger: false,
    forceCloseConnections: 'idle',
  });
}

/** What one replica is built on: its options, pool, cancel wake-ups and lease owner id. */
interface ReplicaBasis {
  readonly options: ControlPlaneOptions;
  readonly pool: Pool;
  readonly wakeups: CancelWakeups;
  readonly replicaOwnerId: string;
}

/** The stores, the dispatch control, the fleet and the routes of a replica whose database is ready. */
async function wireReplica(app: ReturnType<typeof replicaServer>, basis: ReplicaBasis) {
  const { options, pool, wakeups } = basis;
  const dispatchLeaseMs = options.dispatchLeaseMs ?? 10_000;
  const availability = new DispatchAvailability(dispatchLeaseMs);
  const management = new PostgresManagementStore(pool);
  const metrics =
    options.metrics === undefined ? undefined : await createMetricsEndpoint(management, pool, options.metrics);
  const trust = new ServerTrust(app.server as TlsServer, options.tls);
  const workerLeaseMs = options.workerLeaseMs ?? 15_000;
  const sessions = new SessionActivity(workerLeaseMs);
  metrics?.registerSessions(sessions);
  const leases = new ClusterLeaseStore(pool, new PostgresExecutionStore(pool), {
    leaseDurationMs: workerLeaseMs,
  });
  const control = dispatchControlOf(basis, leases, { dispatchLeaseMs, availability, observer: metrics?.observer });
  const requestsHandled = countRequests(app);
  app.setErrorHandler((error, _request, reply) => replyError(reply, error));
  const runStore = new PostgresRunStore(pool);
  const fleet = new FleetControl(pool, management, runStore, metrics?.fleetObserver, (name, actor) =>
    leases.forgetWorker(name, actor),
  );
  const reaper = startReaper(leases);
  wakeups.start();
  addRoutes(app, {
    leases,
    control,
    runStore,
    managementStore: management,
    availability,
    pool,
    metrics,
    fleet,
    trust,
    wakeups,
    sessions,
  });
  return { availability, trust, reaper, requestsHandled };
}

/** This replica's cancellation dispatch: its lease is owned by the replica's stable id (design/cluster §D6). */
function dispatchControlOf(
  basis: ReplicaBasis,
  leases: ClusterLeaseStore,
  dispatch: {
    readonly dispatchLeaseMs: number;
    readonly availability: DispatchAvailability;
    readonly observer: import('../dispatch/index').DispatchObserver | undefined;
  },
): CancellationDispatchControl {
  const { options } = basis;
  const { availability, observer } = dispatch;
  return new CancellationDispatchControl(leases, new PostgresDispatchRepository(basis.pool), {
    replicaOwnerId: basis.replicaOwnerId,
    leaseDurationMs: dispatch.dispatchLeaseMs,
    availability,
    ...(options.observe === undefined ? {} : { observe: options.observe }),
    ...(options.testHooks === undefined ? {} : { testHooks: options.testHooks }),
    ...(observer === undefined ? {} : { observer }),
  });
}

/** How many requests reached the router (refused handshakes never do), in all and by route (a bounded set). */
function countRequests(app: FastifyInstance): (route?: string) => number {
  let handled = 0;
  const byRoute = new Map<string, number>();
  app.addHook('onRequest', async (request) => {
    handled++;
    const route = request.routeOptions.url;
    if (route !== undefined) byRoute.set(route, (byRoute.get(route) ?? 0) + 1);
  });
  return (route) => (route === undefined ? handled : (byRoute.get(route) ?? 0));
}

/** prom-client is loaded here, on demand, and nowhere else in the control plane (docs/decisions/0110). */
async function createMetricsEndpoint(
  management: PostgresManagementStore,
  pool: Pool,
  options: NonNullable<ControlPlaneOptions['metrics']>,
): Promise<
  MetricsEndpoint & {
    readonly observer: import('../dispatch/index').DispatchObserver;
    readonly fleetObserver?: FleetObserver;
    registerSessions(source: SessionActivity): void;
  }
> {
  const { createMetrics } = await import('../metrics/index');
  const overdueAfterMs = options.overdueAfterMs ?? OVERDUE_AFTER_DEFAULT_MS;
  return createMetrics({
    projects: options.projects ?? [],
    overdueAfterMs,
    readProject: (projectId) => readExportedSummary(management, projectId, overdueAfterMs),
    // Fleet gauges need no allowlist: they are counts by state, never a worker's name (docs/decisions/0245).
    readFleet: () => readWorkerFleet(pool),
  });
}

/**
 * Marks expired leases unreachable on a timer of its own (docs/decisions/0270), so a silent worker's
 * runs show it even when no other worker pulls. Every replica runs one; the mark is a CAS, so two never
 * mark one lease twice. Half a lease keeps the mark within 1.5 leases of the last renewal.
 */
function startReaper(leases: ClusterLeaseStore): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(
    () => {
      running = running.then(() => leases.reapExpired()).catch(() => undefined);
    },
    Math.max(100, Math.floor(leases.leaseDurationMs / 2)),
  );
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

function closer(
  app: FastifyInstance,
  pool: Pool,
  wakeups: CancelWakeups,
  drainTimeoutMs: number,
  reaper: { stop(): Promise<void> },
): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      await reaper.stop();
      let timer: NodeJS.Timeout | undefined;
      const cut = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          app.server.closeAllConnections();
          resolve();
        }, drainTimeoutMs);
      });
      // Waiting lease pages answer now (their renewals stand); then in-flight requests drain.
      const closing = app.close();
      await wakeups.close();
      await Promise.race([closing, cut]);
      clearTimeout(timer);
      await pool.end();
    })();
    return closing;
  };
}
