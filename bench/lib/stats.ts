// Sample summaries shared by the benchmarks: every row is reduced the same way, whether its
// samples came from a JS loop or from the C floor program.

/** Nearest-rank quantile (q in [0, 1]) of unsorted samples; NaN when there are none. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export interface Summary {
  readonly median: number;
  readonly p99: number;
  readonly count: number;
}

export function summarize(samples: readonly number[]): Summary {
  return { median: quantile(samples, 0.5), p99: quantile(samples, 0.99), count: samples.length };
}

/**
 * Times `batch` calls of `op` per sample and returns ns per call for each sample. A batch
 * amortises the clock read (~100 ns from JS here) the same way the C floor does.
 */
export function sampleBatches(op: () => void, samples: number, batch: number): number[] {
  const out: number[] = [];
  for (let s = 0; s < samples; s += 1) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < batch; i += 1) op();
    out.push(Number(process.hrtime.bigint() - t0) / batch);
  }
  return out;
}
