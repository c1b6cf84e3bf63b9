// Request schemas of the fleet endpoints (docs/decisions/0240, 0241, 0243): validated by Fastify
// before a handler runs; unknown fields are refused. Names and ids are the contract's rules (docs/decisions/0260).
import { WORKER_ACTIONS, WORKER_CAPACITY_MAX, WORKER_VERSION_MAX_LENGTH } from '../contract/index';
import { FIELD_RULES } from '../contract/json-schemas';

const object = (properties: Record<string, unknown>, required: readonly string[]) =>
  ({ type: 'object', additionalProperties: false, properties, required }) as const;

export const FLEET_SCHEMAS = {
  announce: {
    body: object(
      {
        version: { type: 'string', minLength: 1, maxLength: WORKER_VERSION_MAX_LENGTH },
        capacity: { type: 'integer', minimum: 1, maximum: WORKER_CAPACITY_MAX },
      },
      ['version', 'capacity'],
    ),
  },
  act: {
    params: object({ name: FIELD_RULES.workerName.schema, action: { enum: [...WORKER_ACTIONS] } }, ['name', 'action']),
  },
  runList: {
    params: object({ projectId: FIELD_RULES.id.schema }, ['projectId']),
    querystring: object(
      {
        state: { type: 'string', maxLength: 16 },
        cursor: { type: 'string', maxLength: 512 },
        limit: { type: 'integer', minimum: 1, maximum: 100 },
      },
      [],
    ),
  },
} as const;
