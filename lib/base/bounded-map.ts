// A bounded fan-out: work on a short list, a fixed number of items at once, results in the list's order
// (docs/decisions/0350: the stops of one claimed page).

/**
 * Calls `work` for every item, at most `limit` calls in flight, each started in the list's order;
 * resolves with the results in the list's order. After a call rejected, no further call starts, and
 * the first rejection is thrown once every call already in flight has settled, so nothing started
 * here is still running when the caller hears of it.
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { readonly error: unknown } | null = null;
  const lane = async (): Promise<void> => {
    while (failure === null && next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index] as T, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failure !== null) throw (failure as { readonly error: unknown }).error;
  return results;
}
