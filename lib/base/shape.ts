// The one exact-shape check (docs/decisions/0090 area: one validator toolkit): a plain object whose
// keys are exactly the required ones plus any of the optional ones. Callers turn a problem into
// their own typed error (or, for data read from disk, into "malformed"), so every layer keeps its
// stable codes and sentences while the rule itself lives once.
export type ShapeProblem =
  | { readonly kind: 'not_object' }
  | { readonly kind: 'unknown_key'; readonly key: string }
  | { readonly kind: 'missing_key'; readonly key: string };

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype;
}

/** null when `value` has exactly the allowed keys and every required one (an undefined value is missing). */
export function shapeProblem(
  value: unknown,
  required: readonly string[],
  optional: readonly string[] = [],
): ShapeProblem | null {
  if (!isPlainObject(value)) return { kind: 'not_object' };
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) return { kind: 'unknown_key', key };
  }
  for (const key of required) {
    if (value[key] === undefined) return { kind: 'missing_key', key };
  }
  return null;
}
