// The contract's field rules as JSON Schema, for an HTTP surface that validates before its handlers
// (docs/decisions/0102, 0260): each schema is built from the very pattern its validator tests, so a
// value is valid on every surface or on none, and a refusal carries the validator's code.
import { SIGNAL_NAME_PATTERN } from '../base/limits';
import { WORKER_NAME_PATTERN, validateWorkerName } from './fleet';
import { RUN_NAME_PATTERN, validateRunName } from './run';
import { ID_PATTERN, validateId } from './validators';

/** A string field checked by one contract pattern. */
export interface PatternSchema {
  readonly type: 'string';
  readonly pattern: string;
}

/** One contract rule: its JSON Schema, and the validator whose typed error a refusal answers. */
export interface FieldRule {
  readonly schema: PatternSchema;
  /** Throws the contract's typed error for a value the schema refuses (`what` names the field). */
  readonly validate: (value: unknown, what: string) => unknown;
}

function ruleOf(pattern: RegExp, validate: (value: unknown, what: string) => unknown): FieldRule {
  return { schema: { type: 'string', pattern: pattern.source }, validate };
}

/** The contract's rules that an HTTP schema may name; the only id, name and signal rules there are. */
export const FIELD_RULES = {
  id: ruleOf(ID_PATTERN, validateId),
  runName: ruleOf(RUN_NAME_PATTERN, (value) => validateRunName(value)),
  workerName: ruleOf(WORKER_NAME_PATTERN, (value) => validateWorkerName(value)),
  /** A signal name as a completion reports it; its refusals are the endpoint's (no validator of its own). */
  signalName: { schema: { type: 'string', pattern: SIGNAL_NAME_PATTERN.source }, validate: () => undefined },
} as const satisfies Record<string, FieldRule>;

/** The rule whose schema carries this pattern (a schema refusal names the pattern it failed); undefined for any other. */
export function fieldRuleOfPattern(pattern: unknown): FieldRule | undefined {
  return Object.values(FIELD_RULES).find((rule) => rule.schema.pattern === pattern);
}
