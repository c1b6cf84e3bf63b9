// The Prometheus text exposition format (version 0.0.4) read back strictly for tests
// (docs/decisions/0110): every sample with its labels, every family with its HELP and TYPE, and an
// error on any line that is neither; and which labels a pidfence metric may carry.
import {
  BLOCKING_RESULTS,
  DISPATCH_RESULTS,
  DISPATCH_STATUSES,
  FLEET_REFUSALS,
  WORKER_STATES,
} from '../../lib/contract/index';
import { CLAIM_KINDS, STOP_MODES } from '../../lib/dispatch/index';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Exposition {
  readonly samples: readonly Sample[];
  /** Family name → its TYPE (counter, gauge, histogram, ...). */
  readonly types: ReadonlyMap<string, string>;
  /** The value of the one sample of `name` whose labels include `labels`; undefined when none. */
  value(name: string, labels?: Readonly<Record<string, string>>): number | undefined;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;

function labelsOf(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const match = LABEL.exec(text);
    if (match === null) throw new Error(`malformed labels in: ${line}`);
    labels[match[1] ?? ''] = (match[2] ?? '').replace(/\\(.)/g, (_all, character: string) =>
      character === 'n' ? '\n' : character,
    );
  }
  return labels;
}

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const helped = new Set<string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$/.exec(line);
    if (meta !== null) {
      if (meta[1] === 'TYPE') types.set(meta[2] ?? '', meta[3] ?? '');
      else helped.add(meta[2] ?? '');
      continue;
    }
    const match = SAMPLE.exec(line);
    if (match === null) throw new Error(`not an exposition line: ${line}`);
    const value = Number(match[3] === '+Inf' ? Infinity : match[3]);
    if (Number.isNaN(value)) throw new Error(`not a number: ${line}`);
    samples.push({ name: match[1] ?? '', labels: labelsOf(match[2] ?? '', line), value });
  }
  for (const family of types.keys()) if (!helped.has(family)) throw new Error(`${family} has a TYPE but no HELP`);
  return {
    samples,
    types,
    value(name, labels = {}) {
      const found = samples.filter(
        (sample) =>
          sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
      );
      if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
      return found[0]?.value;
    },
  };
}

/** Every label a pidfence metric may carry, with every value it may take (`le`: a bucket bound). */
export function labelProblems(exposition: Exposition, projects: readonly string[]): string[] {
  const allowed: Readonly<Record<string, readonly string[]>> = {
    result: DISPATCH_RESULTS,
    outcome: CLAIM_KINDS,
    mode: STOP_MODES,
    reason: BLOCKING_RESULTS,
    state: DISPATCH_STATUSES,
    project: projects,
  };
  // The fleet's metrics (docs/decisions/0245) use the same label names with their own bounded values.
  const ownLabels: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>> = {
    pidfence_workers: { state: WORKER_STATES },
    pidfence_worker_refusals_total: { reason: FLEET_REFUSALS },
  };
  const problems: string[] = [];
  for (const sample of exposition.samples) {
    if (!sample.name.startsWith('pidfence_')) problems.push(`${sample.name} is not a pidfence metric`);
    for (const [label, value] of Object.entries(sample.labels)) {
      // A worker session's gauges (docs/decisions/0204): a random session id, never a name.
      if (
        label === 'session' &&
        sample.name.startsWith('pidfence_worker_session_') &&
        /^wks-[0-9a-f-]{36}$/.test(value)
      )
        continue;
      const values = ownLabels[sample.name]?.[label] ?? allowed[label];
      if (label === 'le' ? !/^(\+Inf|\d+(\.\d+)?(e-?\d+)?)$/.test(value) : !values?.includes(value))
        problems.push(`${sample.name}{${label}="${value}"}`);
    }
  }
  return problems;
}
