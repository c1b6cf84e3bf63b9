// Request schemas of the control plane (docs/decisions/0102): Fastify validates every body and
// parameter before a handler runs; unknown fields are refused, not stripped. Ids, names and signals
// are the contract's rules (docs/decisions/0260): valid here exactly when the contract's validators say so.
import { COMPLETION_CAUSES, EXECUTION_PAGE_MAX, RUN_TERMINAL_STATUSES } from '../contract/index';
import { FIELD_RULES, fieldRuleOfPattern } from '../contract/json-schemas';

const ID = FIELD_RULES.id.schema;
const object = (properties: Record<string, unknown>, required: readonly string[]) =>
  ({ type: 'object', additionalProperties: false, properties, required }) as const;

const sessionBody = { sessionId: ID };
/** The most ends one completion page carries: the execution store's page, one transaction (docs/decisions/0432). */
export const COMPLETION_PAGE_MAX = EXECUTION_PAGE_MAX;
/** The longest a lease page may wait for a stop (docs/decisions/0201); a longer tick waits this long. */
export const LEASE_PAGE_WAIT_MAX_MS = 10_000;
const leaseFields = { runId: ID, attemptId: ID, fence: { type: 'integer', minimum: 1 } };
const leaseBody = { ...sessionBody, ...leaseFields };
/** How a worker reports an attempt's end, alone or in a page. */
const endBody = {
  status: { enum: [...RUN_TERMINAL_STATUSES] },
  cause: { enum: [...COMPLETION_CAUSES] },
  exit: {
    anyOf: [
      { type: 'null' },
      object(
        {
          exitCode: { type: ['integer', 'null'] },
          signal: { anyOf: [{ type: 'null' }, FIELD_RULES.signalName.schema] },
        },
        ['exitCode', 'signal'],
      ),
    ],
  },
};
const END_FIELDS = ['runId', 'attemptId', 'fence', 'status', 'cause', 'exit'] as const;

export const SCHEMAS = {
  empty: { body: { type: 'object', additionalProperties: false, maxProperties: 0 } },
  session: { body: object(sessionBody, ['sessionId']) },
  /** A restarted worker settles an earlier session its journal recorded (docs/decisions/0360). */
  settle: { body: object({ ...sessionBody, earlierSessionId: ID }, ['sessionId', 'earlierSessionId']) },
  /**
   * A pull asks for up to `max` jobs (its free slots); without it, one, in the single-assignment shape.
   * `pullId` names it: the same name again is answered what it was granted (docs/decisions/0437).
   */
  pull: {
    body: object({ ...sessionBody, max: { type: 'integer', minimum: 1, maximum: 64 }, pullId: ID }, ['sessionId']),
  },
  /**
   * Every lease a worker holds, once per tick (docs/decisions/0200), and how long the control plane
   * may hold the request for a stop to become due (docs/decisions/0201).
   */
  leasePage: {
    body: object(
      {
        ...sessionBody,
        leases: {
          type: 'array',
          maxItems: 1024,
          items: object({ runId: ID, attemptId: ID, fence: { type: 'integer', minimum: 1 } }, [
            'runId',
            'attemptId',
            'fence',
          ]),
        },
        waitMs: { type: 'integer', minimum: 0, maximum: LEASE_PAGE_WAIT_MAX_MS },
      },
      ['sessionId', 'leases'],
    ),
  },
  lease: { body: object(leaseBody, ['sessionId', 'runId', 'attemptId', 'fence']) },
  completion: { body: object({ ...leaseBody, ...endBody }, ['sessionId', ...END_FIELDS]) },
  /**
   * A page of completion reports (docs/decisions/0432): each exactly a `completion` body without the
   * session, 1 to COMPLETION_PAGE_MAX of them; the store refuses a page that names a run twice.
   */
  completionPage: {
    body: object(
      {
        ...sessionBody,
        completions: {
          type: 'array',
          minItems: 1,
          maxItems: COMPLETION_PAGE_MAX,
          items: object({ ...leaseFields, ...endBody }, END_FIELDS),
        },
      },
      ['sessionId', 'completions'],
    ),
  },
  job: {
    body: object(
      {
        runId: ID,
        projectId: ID,
        argv: { type: 'array', minItems: 1, maxItems: 256, items: { type: 'string', maxLength: 4096 } },
        timeoutMs: { type: 'integer', minimum: 1, maximum: 86_400_000 },
        // Opt-in: the worker stops the job after this long without a renewal (docs/decisions/0273).
        stopAfterDisconnectMs: { type: 'integer', minimum: 1_000, maximum: 86_400_000 },
        // A label for people (docs/decisions/0251).
        name: FIELD_RULES.runName.schema,
      },
      ['runId', 'projectId', 'argv'],
    ),
  },
  runParam: { params: object({ runId: ID }, ['runId']) },
  projectCancel: { params: object({ projectId: ID }, ['projectId']) },
  projectParam: {
    params: object({ projectId: ID }, ['projectId']),
    querystring: object({ cursor: { type: 'string', maxLength: 512 } }, []),
  },
  rearm: {
    params: object({ runId: ID }, ['runId']),
    body: object(
      {
        expectedVersion: { type: 'integer', minimum: 0 },
        expectedStatus: { const: 'blocked' },
        expectedResult: { type: 'string', maxLength: 32 },
      },
      ['expectedVersion', 'expectedStatus', 'expectedResult'],
    ),
  },
} as const;

/** What Fastify reports of a schema refusal: ajv's first error and which part of the request it read. */
interface SchemaRefusal {
  readonly validation?: ReadonlyArray<{
    readonly keyword?: string;
    readonly instancePath?: string;
    readonly params?: { readonly pattern?: unknown };
  }>;
  readonly validationContext?: string;
}

/**
 * A schema refusal of a contract field answered as the contract's own error (docs/decisions/0224,
 * 0260): the field's validator runs on the refused value and its typed error is the answer, so a bad
 * id is ERR_PIDFENCE_INVALID_ID here as everywhere. null for any other refusal (a shape problem).
 */
export function contractRefusalOf(
  error: SchemaRefusal,
  request: { readonly body?: unknown; readonly params?: unknown; readonly query?: unknown },
): unknown {
  const first = error.validation?.[0];
  const rule = first?.keyword === 'pattern' ? fieldRuleOfPattern(first.params?.pattern) : undefined;
  if (rule === undefined || first?.instancePath === undefined) return null;
  const context = error.validationContext;
  let value: unknown =
    context === 'body'
      ? request.body
      : context === 'params'
        ? request.params
        : context === 'querystring'
          ? request.query
          : undefined;
  const path = first.instancePath
    .split('/')
    .slice(1)
    .map((step) => step.replace(/~1/g, '/').replace(/~0/g, '~'));
  for (const step of path) value = (value as Record<string, unknown> | undefined)?.[step];
  try {
    rule.validate(value, path[path.length - 1] ?? 'value');
  } catch (refusal) {
    return refusal;
  }
  return null;
}
