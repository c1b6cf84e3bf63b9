// Request schemas of the control plane (docs/decisions/0102): Fastify validates every body and
// parameter before a handler runs; unknown fields are refused, not stripped.
const ID = { type: 'string', minLength: 1, maxLength: 128 } as const;
const object = (properties: Record<string, unknown>, required: readonly string[]) =>
  ({ type: 'object', additionalProperties: false, properties, required }) as const;

const sessionBody = { sessionId: ID };
const leaseBody = { ...sessionBody, runId: ID, attemptId: ID, fence: { type: 'integer', minimum: 1 } };

export const SCHEMAS = {
  empty: { body: { type: 'object', additionalProperties: false, maxProperties: 0 } },
  session: { body: object(sessionBody, ['sessionId']) },
  lease: { body: object(leaseBody, ['sessionId', 'runId', 'attemptId', 'fence']) },
  completion: {
    body: object({
      ...leaseBody,
      status: { enum: ['succeeded', 'failed', 'cancelled', 'timed_out'] },
      cause: { enum: ['receipt', 'never_started', 'stopped', 'lost'] },
      exit: {
        anyOf: [
          { type: 'null' },
          object({ exitCode: { type: ['integer', 'null'] }, signal: { type: ['string', 'null'], maxLength: 16 } }, ['exitCode', 'signal']),
        ],
      },
    }, ['sessionId', 'runId', 'attemptId', 'fence', 'status', 'cause', 'exit']),
  },
  job: {
    body: object({
      runId: ID, projectId: ID,
      argv: { type: 'array', minItems: 1, maxItems: 256, items: { type: 'string', maxLength: 4096 } },
      timeoutMs: { type: 'integer', minimum: 1, maximum: 86_400_000 },
    }, ['runId', 'projectId', 'argv']),
  },
  runParam: { params: object({ runId: ID }, ['runId']) },
  projectParam: { params: object({ projectId: ID }, ['projectId']), querystring: object({ cursor: { type: 'string', maxLength: 512 } }, []) },
  rearm: {
    params: object({ runId: ID }, ['runId']),
    body: object({
      expectedVersion: { type: 'integer', minimum: 0 },
      expectedStatus: { const: 'blocked' },
      expectedResult: { type: 'string', maxLength: 32 },
    }, ['expectedVersion', 'expectedStatus', 'expectedResult']),
  },
} as const;
